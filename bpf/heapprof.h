/*
 * heapprof.h - the structs and enums shared by the BPF programs
 * (heapprof.bpf.c) and the daemon: map keys and values, probe kinds and
 * error counters. Plain fixed-width types only, so both sides agree on
 * layout.
 */
#ifndef HEAPPROF_SHARED_H
#define HEAPPROF_SHARED_H

#include "hp_limits.h"

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Fixed-point scales of the weights kept in the counts: objects in 1/2^16,
 * bytes in 1/2^8 (so a stack's cumulative bytes can reach 2^56). */
#define HP_OBJ_SHIFT 16
#define HP_BYTES_SHIFT 8
_Static_assert(HP_OBJ_SHIFT > HP_BYTES_SHIFT,
               "hp_weight_bytes() rounds by a shift of HP_OBJ_SHIFT - HP_BYTES_SHIFT - 1");

/* What a probed function is, for its arguments and its result: each row
 * of alloc_entries.h names one; the attach cookie carries it. */
enum hp_kind {
    HP_MALLOC = 0,     /* malloc(size), mallocx(size, flags), mi_malloc_aligned(size, a) */
    HP_CALLOC,         /* calloc(n, m) */
    HP_REALLOC,        /* realloc(p, size) */
    HP_REALLOCARRAY,   /* reallocarray(p, n, m) */
    HP_POSIX_MEMALIGN, /* posix_memalign(&p, align, size) */
    HP_ALIGNED_ALLOC,  /* aligned_alloc(align, size), memalign(align, size) */
    HP_VALLOC,         /* valloc(size), pvalloc(size) */
    HP_FREE,           /* free(p), free_sized(p, n), operator delete(p, ...), sdallocx(p, ...) */
    HP_NEW,            /* operator new(size, ...): may call the allocator's malloc */
    HP_NEW_ARRAY,      /* operator new[](size, ...): may jump to operator new */
    HP_NEW_TARGET,     /* a function operator new jumps to (mi_new_nothrow(size)) */
    HP_XALLOCX,        /* xallocx(p, size, extra, flags): resizes p in place, returns its size */
    HP_LOADER,         /* dlopen, dlmopen: the in-process sampler's only, never probed */
    HP_KIND_COUNT,
};

#include "alloc_entries.h"

/* Whether a call into `kind` continues a call into `prev` that jumped to
 * it, and so is counted once, at the first: glibc's realloc(NULL, n) jumps
 * to malloc, reallocarray to realloc, libstdc++'s and jemalloc's operator
 * new[] to operator new, mimalloc's nothrow operator new to mi_new_nothrow.
 * The relation has no cycle: a loop calling one function from one site
 * (same stack pointer, same return address) is never taken for a jump.
 * The BPF programs and the in-process sampler must agree on it. */
static inline int hp_forwards(__u32 prev, __u32 kind)
{
    return (prev == HP_REALLOC && kind == HP_MALLOC) ||
           (prev == HP_REALLOCARRAY && (kind == HP_REALLOC || kind == HP_MALLOC)) ||
           (prev == HP_NEW_ARRAY && (kind == HP_NEW || kind == HP_NEW_TARGET)) ||
           (prev == HP_NEW && kind == HP_NEW_TARGET);
}

/* Per-CPU error and event counters (index into the `stats` map). */
enum hp_stat {
    HP_STAT_SAMPLES = 0,       /* sampled allocations recorded */
    HP_STAT_FREES_MATCHED,     /* frees of sampled pointers */
    HP_STAT_NESTED,            /* allocator calls inside another, counted at the outer one */
    HP_STAT_STACK_COLLISION,   /* a stack hash probe found a different stack */
    HP_STAT_STACK_DROPPED,     /* no stack slot: sample dropped */
    HP_STAT_COUNTS_FULL,       /* counts map full: sample dropped */
    HP_STAT_LIVE_FULL,         /* live map full: allocation not tracked for in-use */
    HP_STAT_PENDING_FULL,      /* pending map full: sampled call lost */
    HP_STAT_STACK_TRUNCATED,   /* stack deeper than HP_MAX_FRAMES */
    HP_STAT_STACK_READ_ERROR,  /* a user-memory read failed during the walk */
    HP_STAT_UNWIND_FP_FRAMES,  /* a frame at a pc no CFI row covers (no table, a table's
                                * gap, JIT code): unwound by its frame pointer */
    HP_STAT_UNWIND_BAD_FP,     /* no CFI row, and a frame pointer that is unknown, unaligned,
                                * below the stack pointer or outside the thread's stack: stopped */
    HP_STAT_UNWIND_UNSUPPORTED, /* CFI we do not model: the walk stopped */
    HP_STAT_UNWIND_BAD_FRAME,  /* a CFA that does not move up the stack: the walk stopped */
    HP_STAT_UNWIND_CFI_STACKS, /* stacks walked with unwind tables */
    HP_STAT_UNWIND_COMPLETE,   /* of those, stacks walked to their outermost frame */
    HP_STAT_UNWIND_NOT_CODE,   /* no CFI row, and the frame pointer's return address is
                                * outside executable mappings: stopped */
    HP_STAT_UNWIND_MM_BUSY,    /* no CFI row, and the address space was being changed, so the
                                * frame pointer could not be checked: stopped */
    HP_STAT_RETURNS_UNHIDDEN,  /* return addresses a pending uretprobe had replaced by its
                                * trampoline, read back from the kernel */
    HP_STAT_SHARE_STACKS,      /* a new stack or (process, stack) row refused: the process
                                * holds its share (hp_process_share): sample dropped */
    HP_STAT_SHARE_LIVE,        /* a live entry refused: the process holds its share of the
                                * live map; allocation not tracked for in-use */
    HP_STAT_FREES_UNSEEN,      /* in-process: a live sample's address given out again, its free
                                * made through no slot (a pointer to free kept from before the
                                * attach): taken out of in-use then */
    HP_STAT_REPORTS_DROPPED,   /* in-process: a report from a process that maps the shared
                                * sampler file but is not attached (a fork child before its
                                * attach): not counted */
    HP_STAT_FREES_RING,        /* in-process: frees of sampled pointers applied from the ring */
    HP_STAT_FREES_RING_LATER,  /* ring frees of an address that a later sampled allocation
                                * already holds: that later life is kept */
    HP_STAT_FREE_RING_FULL,    /* in-process: frees that found the ring full and trapped */
    HP_STAT_RETURNS_UNCHECKED, /* sampled calls on a kernel whose return_instances could
                                * not be read (CO-RE): hidden return addresses not recovered */
    HP_STAT_OWNER_STACKS,      /* a new stack or (process, stack) row refused: the process's
                                * owner (real uid) holds its share (hp_owner_share): dropped */
    HP_STAT_OWNER_LIVE,        /* a live entry refused: the owner holds its share of the
                                * live map; allocation not tracked for in-use */
    HP_STAT_COUNT,
};

/* Key of the counts map: one process, one stack. */
struct hp_count_key {
    __u32 tgid;
    __u32 pad;
    __u64 stack_id;
};

/* Weighted totals of one (process, stack); fixed point, see the shifts. */
struct hp_counts {
    __u64 alloc_objects;
    __u64 alloc_bytes;
    __s64 inuse_objects;
    __s64 inuse_bytes;
};

/* A stack: return addresses, leaf first. */
struct hp_stack {
    __u32 len;
    __u32 pad;
    __u64 frames[HP_MAX_FRAMES];
};

/* Key of the live map: addresses repeat across processes. */
struct hp_live_key {
    __u32 tgid;
    __u32 pad;
    __u64 ptr;
};

/* What one process holds of the shared maps (the `shares` map's value,
 * keyed by tgid): stacks it added to the stacks map, its rows in the
 * counts map, its entries in the live map. Signed, so that a count that
 * went below zero (entries that predate it) reads as room, not as full.
 * The same record, keyed by uid, sums what one owner's processes hold
 * (the `owner_shares` map). */
struct hp_share {
    __s32 stacks;
    __s32 rows;
    __s32 live;
    __u32 uid; /* shares: the process's real uid, whose owner record its counts are in */
};

/* A sampled allocation still alive, with the weights it added. */
struct hp_live {
    __u64 stack_id;
    __u64 size;
    __u64 w_objects;
    __u64 w_bytes;
    __u64 time_ns;  /* when recorded (never 0); 0 once a remover has claimed it, just before
                     * it deletes it: exactly one remover takes the weights out */
    __u64 ring_pos; /* in-process: the ring's producer after the allocation; a ring free
                     * at a position below it is of an earlier life (0: uprobe sampler) */
};

/* The context of the drain program (hp_drain_frees, a BPF_PROG_TYPE_SYSCALL
 * program run by the daemon): `n` pointers read from process `tgid`'s ring
 * of frees, the first at ring position `first_pos`, in the daemon's memory
 * at `ptrs`. What it did is counted in the stats map. */
struct hp_drain_args {
    __u32 tgid;
    __u32 n;
    __u64 first_pos;
    __u64 ptrs;
};

/* Key of a call between its entry and return: a thread and its stack
 * pointer at entry, so that a nested or re-entered call has its own. */
struct hp_pending_key {
    __u64 pid_tgid;
    __u64 sp;
};

/* What the return probe needs of a call the entry probe chose. */
struct hp_pending {
    __u64 size;
    __u64 stack_id;   /* 0: not sampled (only the realloc of a live pointer) */
    __u64 old_ptr;    /* realloc: the pointer being resized */
    __u64 out_ptr;    /* posix_memalign: where the pointer is written */
    __u32 kind;
    __u32 old_live;   /* realloc: old_ptr was a sampled live pointer */
};

/* One attached allocator object in one process: where its probed functions
 * are, so that a call made from inside one of them is seen as nested. */
struct hp_image {
    __u32 nfuncs;
    __u32 pad;
    __u64 lo, hi; /* the envelope of all ranges: most callers are outside it */
    __u64 start[HP_MAX_FUNCS];
    __u64 end[HP_MAX_FUNCS];
};

/* One executable mapping of a process whose file has an unwind table in
 * the shared rows array: runtime pc - bias = the table's row pc. */
struct hp_unwind_mapping {
    __u64 start;
    __u64 end;
    __u64 bias;
    __u32 first_row;
    __u32 nrows;
};

/* The mappings of one process with tables, sorted by start. */
struct hp_unwind_proc {
    __u32 n;
    __u32 pad;
    struct hp_unwind_mapping m[HP_MAX_UNWIND_MAPPINGS];
};

/* Version of the pinned maps' layout and meaning: a daemon refuses pinned
 * maps of another version rather than misread them. Bump it whenever a
 * pinned map's key, value or semantics change. */
#define HP_STATE_VERSION 5
#define HP_STATE_MAGIC 0x68656170u /* "heap" */

/* What the pinned maps were made with (the `meta` map's one value). */
struct hp_meta {
    __u32 magic;
    __u32 version;
    __u64 sample_interval;
};

/* A profiled process as remembered across daemon restarts. */
struct hp_persisted_target {
    __u32 pid;
    __u32 exe_ino;    /* low 32 bits of its executable's inode: tells an exec */
    __u64 start_time;
};

/* The image slot of links that profile no process: the start-up
 * calibration of a probe hit's cost (daemon/attach/probe_cost.c), and the
 * links made for a moment to take inherited probes out of a child that
 * cannot be profiled (targets_scrub_inherited()). One past the targets'
 * slots; its image is empty. */
#define HP_SPARE_SLOT HP_MAX_TARGETS

/* Attach cookies of the in-process sampler's report functions. */
#define HP_REPORT_ALLOC 0
#define HP_REPORT_FREE 1

/* Attach cookie: image slot in the upper bits, probe kind in the low
 * HP_COOKIE_KIND_BITS. */
#define HP_COOKIE_KIND_BITS 8
#define HP_COOKIE(image, kind) (((__u64)(image) << HP_COOKIE_KIND_BITS) | (__u64)(kind))
#define HP_COOKIE_IMAGE(c) ((__u32)((c) >> HP_COOKIE_KIND_BITS))
#define HP_COOKIE_KIND(c) ((__u32)((c) & ((1u << HP_COOKIE_KIND_BITS) - 1)))
_Static_assert(HP_KIND_COUNT <= (1u << HP_COOKIE_KIND_BITS),
               "every kind fits a cookie's kind bits");
_Static_assert(HP_SPARE_SLOT <= (~0u >> HP_COOKIE_KIND_BITS),
               "every slot fits a cookie's image bits");

#endif
