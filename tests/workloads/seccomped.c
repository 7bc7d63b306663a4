/*
 * seccomped.c - a process all of whose threads run under a seccomp filter
 * (one that allows every call: what matters is that a filter is there),
 * for test_inprocess_safety.py: the in-process sampler must refuse it,
 * cleanly, and leave no thread stopped. With the argument "one", only a
 * second thread installs the filter, and the attach must go on through
 * another thread.
 *
 * Protocol: "ready PID", then it allocates until a line arrives.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "handshake.h"

static atomic_int stop;

static void allow_all_filter(void)
{
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = 1, .filter = &allow};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        handshake_die("install a seccomp filter");
}

static void *worker(void *arg)
{
    if (arg)
        allow_all_filter();
    while (!atomic_load(&stop)) {
        void *p = malloc(128);
        handshake_touch(p, 128);
        free(p);
        usleep(50);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int one = argc > 1 && strcmp(argv[1], "one") == 0;
    if (!one)
        allow_all_filter(); /* inherited by the thread created next */
    pthread_t t;
    pthread_create(&t, NULL, worker, one ? (void *)1 : NULL);
    usleep(20000);
    handshake_ready();
    handshake_wait_line();
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    return 0;
}
