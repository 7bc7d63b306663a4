/*
 * slow_ctor.c - a library whose constructor does not return until told:
 * dlopen runs constructors with the dynamic linker's load lock held, so
 * while it waits the lock is held by a live thread, for
 * loader_hold.c (test_loader_lock.py). It says it is in by writing a byte
 * to the descriptor in SLOW_CTOR_IN, then waits for a byte on the socket
 * in SLOW_CTOR_WAIT: a recv, which a stop would interrupt, so the daemon
 * never runs its installer on this thread (thread_stop.c).
 */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

__attribute__((constructor)) static void wait_until_told(void)
{
    const char *in = getenv("SLOW_CTOR_IN"), *wait = getenv("SLOW_CTOR_WAIT");
    if (!in || !wait)
        return;
    char c = 1;
    if (write(atoi(in), &c, 1) != 1)
        abort();
    while (recv(atoi(wait), &c, 1, 0) < 0)
        ;
}

int slow_ctor_loaded(void)
{
    return 1;
}
