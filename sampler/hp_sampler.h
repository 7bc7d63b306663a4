/*
 * hp_sampler.h - the contract between the in-process sampler (sampler/,
 * injected into a profiled process) and the daemon that injects it
 * (daemon/inject/): the entry points it interposes on, the layout of its
 * configuration and of what its installer reports, and the names of the
 * symbols the daemon looks up.
 *
 * The sampler interposes through relocation slots: the GOT and data slots
 * that bind each loaded module to an allocator entry point are pointed at
 * its wrappers, and no byte of code is ever written.
 *
 * Plain fixed-width types only: the sampler is built without libc.
 */
#ifndef HEAPPROF_HP_SAMPLER_H
#define HEAPPROF_HP_SAMPLER_H

#include <linux/types.h>

#include "hp_limits.h"
#include "sampling_math.h"

/* "hpsampl" and a version: a restarted daemon adopts a sampler only of the
 * layout it knows and of its own build (hp_sampler_build_id). Bump the
 * version whenever a struct below or a symbol's meaning changes. */
#define HP_SAMPLER_MAGIC 0x6c706d6173706800ULL
#define HP_SAMPLER_VERSION 4

/* The name of the memfd the sampler is mapped from: /proc/PID/maps shows
 * "/memfd:heapprofd-sampler (deleted)", which is how a restarted daemon
 * finds a sampler already in a process. */
#define HP_SAMPLER_MEMFD_NAME "heapprofd-sampler"

/* Threads share countdown slots found by a hash of their thread pointer:
 * 1024 slots of one cache line each (64 KiB). Two threads in one slot only
 * share a countdown, which stays unbiased (waits are memoryless). */
#define HP_SAMPLER_SLOTS (1 << HP_SAMPLER_SLOTS_LOG2) /* hp_limits.h */

/* The filter of sampled pointers still alive: 8192 buckets of 8 pointers
 * (one cache line each, 512 KiB), and a byte per bucket saying how many it
 * holds (8 KiB, small enough to stay in cache, so that freeing an unsampled
 * pointer costs one load). At the default interval a process has about one
 * live sample per 512 KiB of heap: 16 GiB of heap fill a quarter of it. */
#define HP_FILTER_BUCKETS (1 << HP_FILTER_BUCKETS_LOG2) /* hp_limits.h */
#define HP_FILTER_WAYS 8
/* A bucket that overflowed: every free hashing to it is reported (the BPF
 * side looks the pointer up), so nothing is missed, only slower. */
#define HP_FILTER_SATURATED 0xff

/* The functions whose slots the sampler takes are the rows of
 * alloc_entries.h (enum hp_entry, HP_E_<symbol>); the daemon resolves
 * each one's address (the function the process's calls bind to) into
 * hp_sampler_config.orig. */
#include "heapprof.h"

/* The second argument of hp_report_free: why the pointer is reported. */
enum hp_free_reason {
    HP_FREED = 0,         /* a wrapper of free or realloc freed it */
    HP_FREED_UNSEEN = 1,  /* an allocation returned it while it was still a live sample: its
                           * free went through no slot (a pointer to free kept from before
                           * the attach) */
    HP_FREED_RING_FULL = 2, /* a wrapper freed it, and the ring of frees was full */
};

/*
 * The ring of freed sampled pointers (docs/sampler.md, "Frees through a
 * ring"): a free wrapper that finds its pointer in the filter claims
 * position p (producer, only while producer - consumer < the size), writes
 * the pointer at ptr[p % size] and then p + 1 at pos[p % size] (release),
 * and only then calls the real free. The daemon reads the producer and
 * pos[] first, then ptr[], applies the entries whose pos says they are
 * written, in order, and moves the consumer past them. A sampled
 * allocation reports the producer read after the allocator returned: BPF
 * keeps it in the live entry, and a ring free at position p applies only
 * to a live entry recorded at a producer <= p (the same address given out
 * again after that free was claimed is a later life).
 * In the sampler's private writable memory: a forked child has a copy of
 * its parent's (its parent's pointers, harmless for the child's tgid).
 */
struct hp_free_ring {
    __u64 producer;        /* next position to claim */
    __u64 full;            /* frees that found the ring full (and trapped) */
    __u8 pad0[48];
    __u64 consumer;        /* written by the daemon: positions below are drained */
    __u8 pad1[56];
    __u64 pos[HP_FREE_RING_SIZE]; /* position + 1 once ptr[] at that index is written */
    __u64 ptr[HP_FREE_RING_SIZE];
};

/*
 * One page of the sampler's private memory marked MADV_WIPEONFORK by the
 * installer: opt_report selects the report function that starts with a
 * 5-byte nop (hp_report_alloc_opt), which Linux 6.18 turns into a call to
 * a [uprobes-trampoline] mapping that fork() does not copy. A forked child
 * reads 0 here and reports through the plain function until the daemon has
 * checked it and set the flag again.
 * ring_on lets frees go through the ring: set by the daemon once a process
 * has been profiled for FREE_RING_AFTER_MS (daemon/inject/free_ring.h), so
 * that a short-lived process, whose last frees would still be in its ring
 * when it exits (its memory gone before the daemon could drain it), traps
 * them all; wiped in a forked child, whose life starts anew.
 */
struct hp_fork_page {
    __u32 opt_report;
    __u32 ring_on;
    __u8 pad[4096 - 8];
};

/* What the daemon writes into the sampler before any slot points at it. */
struct hp_sampler_config {
    __u64 magic;          /* HP_SAMPLER_MAGIC once configured */
    __u32 version;        /* HP_SAMPLER_VERSION */
    __u32 enabled;        /* 0: every wrapper only forwards */
    __u64 sample_interval;
    __u64 self_lo, self_hi;   /* the sampler's code: calls from it are nested */
    __u64 alloc_lo, alloc_hi; /* the envelope of the allocator's functions */
    __u32 nranges;
    __u32 pad;
    __u64 range_lo[HP_MAX_FUNCS]; /* each allocator function's code */
    __u64 range_hi[HP_MAX_FUNCS];
    __u64 orig[HP_ENTRY_COUNT];   /* what each entry's slots bind to; 0: not taken */
    __u64 dl_iterate_phdr;        /* the loader's walk of its modules (where load_lock is 0) */
    __u64 r_debug;                /* the base namespace's module list (struct r_debug) */
    __u32 log2_table[HP_LOG2_TABLE_LEN]; /* as the BPF side's (sampling_math.h) */
    __u32 free_ring;      /* 1: frees of sampled pointers go through hp_free_ring */
    __u32 pad2;
    __u64 load_lock;      /* glibc's _dl_load_lock (a recursive pthread mutex), under which
                           * the installer walks r_debug's list itself; 0: not glibc, the
                           * walk goes through dl_iterate_phdr */
    __u64 exe_phdr;       /* the executable's program headers (AT_PHDR), and their count */
    __u64 exe_phnum;
};

/* The last remote call's outcome, written by the installer. */
struct hp_install_status {
    __s64 result;         /* slots changed, or -errno */
    __u32 modules;        /* modules of the base namespace looked at */
    __u32 slots_taken;    /* slots pointing at a wrapper after an install */
    __u32 slots_skipped;  /* named slots bound elsewhere (another allocator), left alone */
    __u32 slots_failed;   /* slots that could not be written (mprotect refused) */
    __u32 dlopens;        /* modules loaded since the attach whose slots were taken */
    __u32 dlopen_untaken; /* dlopen calls whose new slots could not be taken */
    __u64 done;           /* the cookie of the last remote call, written once it is over
                           * and the thread's state is back (report.S) */
    __s64 wipeonfork;     /* madvise(hp_fork_page, MADV_WIPEONFORK) at the last install:
                           * 0, or -errno (then the optimized report is never used) */
    __u32 lock_timeouts;  /* walks given up: the load lock stayed held (loader_lock.c) */
    __u32 lock_dead_owner; /* walks given up: the load lock held by no thread of ours */
    __u32 modules_unread; /* modules in the list whose program headers were not found */
    __u32 pad;
    __u32 taken_by_entry[HP_ENTRY_COUNT]; /* of slots_taken, each entry's: which entry
                           * families the process's calls reach the wrappers by */
};

/* The installer's results besides slots changed: -EAGAIN (the list was
 * being changed), -EBUSY (the load lock stayed held), -EOWNERDEAD (the
 * load lock is held by a thread that is not in the process). */

/* The operations of hp_remote_call (its first argument). */
#define HP_REMOTE_INSTALL 1   /* point every slot bound to the allocator at a wrapper */
#define HP_REMOTE_UNINSTALL 2 /* point every slot holding a wrapper back */

/* Symbols of the sampler the daemon looks up by name. */
#define HP_SAMPLER_CONFIG_SYM "hp_sampler_config"
#define HP_INSTALL_STATUS_SYM "hp_install_status"
#define HP_REPORT_ALLOC_SYM "hp_report_alloc"
#define HP_REPORT_FREE_SYM "hp_report_free"
#define HP_REPORT_ALLOC_OPT_SYM "hp_report_alloc_opt"
#define HP_FREE_RING_SYM "hp_free_ring"
#define HP_FORK_PAGE_SYM "hp_fork_page"
#define HP_REMOTE_CALL_SYM "hp_remote_call"
/* The system call the stub makes when hp_remote_call returns into it
 * (getpid: harmless), before it puts the thread back; report.S uses it. */
#define HP_REMOTE_DONE_SYSCALL 39

#endif
