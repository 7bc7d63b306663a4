/*
 * many_maps.c - a workload with more executable file mappings than the
 * unwinder keeps tables for per process (HP_MAX_UNWIND_MAPPINGS, 256), for
 * tests/integration/test_diagnostics.py.
 *
 * Usage: many_maps N. Before "ready" it maps the first page of its own
 * executable N times with PROT_EXEC, each mapping apart from the others
 * (file offset 0 every time, so the kernel cannot merge them). Then it
 * speaks the handshake and allocates nothing.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "handshake.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0;
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || n <= 0)
        handshake_die("many_maps: usage: many_maps N (and a readable /proc/self/exe)");
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < n; i++)
        if (mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
            handshake_die("many_maps: mmap failed");
    close(fd);
    handshake_ready();
    handshake_wait_line();
    handshake_done();
    handshake_wait_line();
    return 0;
}
