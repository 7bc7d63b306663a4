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
 *   emulated      the floor: malloc entry + free at the site
 *                 probe_site_choose() picks (past its NULL test, on an
 *                 instruction the kernel emulates), both in ONE uprobe_multi
 *                 link created with the bpf() syscall (daemon/bpfstate/uprobe_link.c),
 *                 exactly where heapprofd puts its entry probes
 *   session       the same sites in one uprobe session link (Linux 6.13+)
 *                 whose entry program returns 1, so no return probe ever
 *                 runs: the kernel's cost of a session over a plain entry
 *
 * For the perf-event layouts libbpf resolves the symbols itself
 * (bpf_uprobe_opts.func_name turns "malloc" into its file offset in the
 * library); for `emulated` daemon/process/elf_file.c does, as heapprofd does. The
 * probes fire only in process N, all of its threads. Prints "attached" once all probes are
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

#include "elf_file.h"
#include "floor.skel.h"
#include "probe_site.h"
#include "uprobe_link.h"

/* The C library whose malloc and free are probed (Debian 12, x86-64). */
#define DEFAULT_LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* The probes a layout may attach, as bits. */
enum {
    PROBE_MALLOC_ENTRY = 1 << 0,
    PROBE_MALLOC_RETURN = 1 << 1,
    PROBE_FREE_ENTRY = 1 << 2,
    /* malloc entry + free's emulated site, one uprobe_multi link. */
    PROBE_MULTI_EMULATED = 1 << 3,
    /* The same sites, one uprobe session link that never asks for a return. */
    PROBE_SESSION_EMULATED = 1 << 4,
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
    {"emulated", PROBE_MULTI_EMULATED},
    {"session", PROBE_SESSION_EMULATED},
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

/*
 * The file offset of `func` in `libc` where its entry probe goes: the site
 * probe_site_choose() picks, as heapprofd's allocator.c does. 0 or -errno.
 */
static int probe_offset(struct elf_file *ef, const char *libc, const char *func,
                        enum hp_kind kind, uint64_t *offset)
{
    struct probe_site site = {.offset = 0, .emulated = 0, .reason = "code not readable"};
    struct elf_symbol sym;
    uint8_t code[4096];
    size_t len;
    int err;

    err = elf_file_find_function(ef, func, true, &sym);
    if (!err)
        err = elf_file_vaddr_to_offset(ef, sym.vaddr, offset);
    if (err) {
        fprintf(stderr, "floor_probes: %s in %s: %s\n", func, libc, strerror(-err));
        return err;
    }
    len = !sym.size ? 64 : sym.size < sizeof(code) ? sym.size : sizeof(code);
    if (elf_file_read(ef, sym.vaddr, code, len) == 0)
        probe_site_choose(code, len, kind, sym.size && sym.size <= len, &site);
    *offset += site.offset;
    fprintf(stderr, "floor_probes: %s probed at +%zu (%s, %s)\n", func, site.offset,
            site.emulated ? "emulated" : "not emulated", site.reason);
    return 0;
}

/*
 * Attaches the emulated or session layout: one link of `prog` (loaded for
 * `attach_type`) on malloc's and free's probe sites. Returns the link's fd
 * or -errno.
 */
static int attach_emulated(struct bpf_program *prog, uint32_t attach_type, const char *libc,
                           int pid)
{
    uint64_t offsets[2], cookies[2] = {0, 0};
    struct elf_file *ef;
    int err;

    err = elf_file_open(libc, &ef);
    if (err) {
        fprintf(stderr, "floor_probes: open %s: %s\n", libc, strerror(-err));
        return err;
    }
    err = probe_offset(ef, libc, "malloc", HP_MALLOC, &offsets[0]);
    if (!err)
        err = probe_offset(ef, libc, "free", HP_FREE, &offsets[1]);
    elf_file_close(ef);
    if (err)
        return err;
    err = uprobe_link_create(bpf_program__fd(prog), attach_type, libc, offsets, cookies, 2, 0,
                             pid);
    if (err < 0)
        fprintf(stderr, "floor_probes: uprobe %s link on %s for pid %d: %s\n",
                attach_type == HP_BPF_TRACE_UPROBE_SESSION ? "session" : "multi", libc, pid,
                strerror(-err));
    return err;
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
            "usage: %s --pid N [--layout classic|entry|malloc-entry|free-entry|emulated|session]"
            " [--libc PATH]\n",
            argv0);
    return 2;
}

/* Parses the command line, attaches the layout's probes and holds them until told to stop. */
int main(int argc, char **argv)
{
    const struct layout *layout = &layouts[0];
    const char *libc = DEFAULT_LIBC;
    struct floor *skel = NULL;
    struct sigaction sa;
    char *end;
    int pid = 0, err = 0, link_fd = -1;

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

    skel = floor__open();
    if (!skel) {
        err = -errno;
        fprintf(stderr, "floor_probes: open floor.bpf.o: %s\n", strerror(-err));
        goto out;
    }
    /* Debian's libbpf 1.1 knows neither attach type: the numbers go in as they are. */
    if (layout->probes & PROBE_MULTI_EMULATED)
        bpf_program__set_expected_attach_type(
            skel->progs.floor_malloc_entry, (enum bpf_attach_type)HP_BPF_TRACE_UPROBE_MULTI);
    /* Only a kernel with sessions would load the session program for them. */
    if (layout->probes & PROBE_SESSION_EMULATED)
        bpf_program__set_expected_attach_type(
            skel->progs.floor_session_entry, (enum bpf_attach_type)HP_BPF_TRACE_UPROBE_SESSION);
    else
        bpf_program__set_autoload(skel->progs.floor_session_entry, false);
    err = floor__load(skel);
    if (err) {
        fprintf(stderr, "floor_probes: load floor.bpf.o: %s\n", strerror(-err));
        goto out;
    }
    if (layout->probes & (PROBE_MULTI_EMULATED | PROBE_SESSION_EMULATED)) {
        if (layout->probes & PROBE_MULTI_EMULATED)
            link_fd = attach_emulated(skel->progs.floor_malloc_entry, HP_BPF_TRACE_UPROBE_MULTI,
                                       libc, pid);
        else
            link_fd = attach_emulated(skel->progs.floor_session_entry,
                                       HP_BPF_TRACE_UPROBE_SESSION, libc, pid);
        if (link_fd < 0) {
            err = link_fd;
            goto out;
        }
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
    /* Closing the multi link and destroying the skeleton (with its links)
     * detach the probes. */
    if (link_fd >= 0)
        close(link_fd);
    floor__destroy(skel);
    return err ? 1 : 0;
}
