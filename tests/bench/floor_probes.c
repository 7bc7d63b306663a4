/*
 * floor_probes.c - attaches the do-nothing floor probes (floor.bpf.c) to one
 * process, for the overhead benchmark.
 *
 * Usage: floor_probes --pid N [--layout LAYOUT] [--libc PATH]
 *
 * The classic layout (the default) is where bcc memleak and similar tools
 * attach: uprobes at the first instruction of malloc and free and a
 * uretprobe on malloc. glibc's free starts with `test %rdi,%rdi`, which the
 * kernel cannot emulate and must single-step out of line; that expensive
 * trap is part of the floor on purpose. The other layouts attach a subset,
 * to split the floor into its parts:
 *   entry         malloc entry + free entry (no return probe)
 *   malloc-entry  malloc entry only
 *   free-entry    free entry only
 *
 * libbpf resolves the symbols itself (bpf_uprobe_opts.func_name turns
 * "malloc" into its file offset in the library), and the probes fire only
 * in process N, all of its threads. Prints "attached" once all probes are
 * in place, then holds them until stdin reaches end of file or SIGTERM or
 * SIGINT arrives, and detaches on the way out.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "floor.skel.h"

/* The C library whose malloc and free are probed (Debian 12, x86-64). */
#define DEFAULT_LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* The probes a layout may attach, as bits. */
enum {
    PROBE_MALLOC_ENTRY = 1 << 0,
    PROBE_MALLOC_RETURN = 1 << 1,
    PROBE_FREE_ENTRY = 1 << 2,
};

/* A named set of probes. */
struct layout {
    const char *name;
    unsigned probes;
};

/* The layouts --layout accepts; the first is the default. */
static const struct layout layouts[] = {
    {"classic", PROBE_MALLOC_ENTRY | PROBE_MALLOC_RETURN | PROBE_FREE_ENTRY},
    {"entry", PROBE_MALLOC_ENTRY | PROBE_FREE_ENTRY},
    {"malloc-entry", PROBE_MALLOC_ENTRY},
    {"free-entry", PROBE_FREE_ENTRY},
};

/* Set by SIGTERM or SIGINT: time to detach. */
static volatile sig_atomic_t stop_requested;

/* Records that the loader should detach and exit. */
static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* Attaches one program to func in libc for pid; 0 or a negative errno. */
static int attach_one(struct bpf_program *prog, struct bpf_link **link, const char *libc,
                      const char *func, bool retprobe, int pid)
{
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = func, .retprobe = retprobe);
    int err;

    *link = bpf_program__attach_uprobe_opts(prog, pid, libc, 0, &opts);
    if (!*link) {
        err = -errno;
        fprintf(stderr, "floor_probes: attach %s to %s:%s for pid %d: %s\n",
                retprobe ? "uretprobe" : "uprobe", libc, func, pid, strerror(-err));
        return err;
    }
    return 0;
}

/* Blocks until stdin reaches end of file or a stop signal arrives. */
static void wait_for_stop(void)
{
    char buf[256];
    ssize_t n;

    while (!stop_requested) {
        n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EINTR))
            break;
    }
}

/* Prints the usage line and returns the exit code for a usage error. */
static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --pid N [--layout classic|entry|malloc-entry|free-entry] [--libc PATH]\n",
            argv0);
    return 2;
}

int main(int argc, char **argv)
{
    const struct layout *layout = &layouts[0];
    const char *libc = DEFAULT_LIBC;
    struct floor *skel = NULL;
    struct sigaction sa;
    char *end;
    int pid = 0, err = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
            pid = (int)strtol(argv[++i], &end, 10);
            if (*end || pid <= 0)
                return usage(argv[0]);
        } else if (!strcmp(argv[i], "--layout") && i + 1 < argc) {
            const char *name = argv[++i];

            layout = NULL;
            for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++)
                if (!strcmp(layouts[l].name, name))
                    layout = &layouts[l];
            if (!layout)
                return usage(argv[0]);
        } else if (!strcmp(argv[i], "--libc") && i + 1 < argc) {
            libc = argv[++i];
        } else {
            return usage(argv[0]);
        }
    }
    if (!pid)
        return usage(argv[0]);

    /* No SA_RESTART: a signal must interrupt the read in wait_for_stop. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    skel = floor__open_and_load();
    if (!skel) {
        err = -errno;
        fprintf(stderr, "floor_probes: open and load floor.bpf.o: %s\n", strerror(-err));
        goto out;
    }
    if (layout->probes & PROBE_MALLOC_ENTRY) {
        err = attach_one(skel->progs.floor_malloc_entry, &skel->links.floor_malloc_entry, libc,
                         "malloc", false, pid);
        if (err)
            goto out;
    }
    if (layout->probes & PROBE_MALLOC_RETURN) {
        err = attach_one(skel->progs.floor_malloc_return, &skel->links.floor_malloc_return, libc,
                         "malloc", true, pid);
        if (err)
            goto out;
    }
    if (layout->probes & PROBE_FREE_ENTRY) {
        err = attach_one(skel->progs.floor_free_entry, &skel->links.floor_free_entry, libc, "free",
                         false, pid);
        if (err)
            goto out;
    }

    printf("attached\n");
    fflush(stdout);
    wait_for_stop();

out:
    /* Destroying the skeleton destroys its links, which detaches the probes. */
    floor__destroy(skel);
    return err ? 1 : 0;
}
