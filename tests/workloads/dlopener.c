/*
 * dlopener.c - after "go", has its library (dlcaller.c) dlopen a plugin
 * and run its allocations (dlalloc.c), for test_inprocess_safety.py.
 * Says "done", or exits 3 if the plugin could not be loaded.
 */
#include <stdlib.h>

#include "handshake.h"

int dlcaller_load_and_run(int n);

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 50;
    handshake_ready();
    handshake_wait_line();
    if (dlcaller_load_and_run(n) != 0)
        exit(3);
    handshake_done();
    handshake_wait_line();
    return 0;
}
