/*
 * hp_limits.h - every size limit of heapprofd's BPF maps and stacks, in one
 * place, each with the reason for its number. Included by both the BPF
 * programs and the daemon.
 */
#ifndef HEAPPROF_LIMITS_H
#define HEAPPROF_LIMITS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Whether `n` is a power of two: a table indexed by a mask must be. */
#define HP_IS_POW2(n) ((n) > 0 && ((n) & ((n)-1)) == 0)

/* Frames kept per stack: perf's default user stack depth is 127, and
 * deeper stacks are rare outside runaway recursion. */
#define HP_MAX_FRAMES 127

/* Distinct stacks across all profiled processes. A stack is 1 KiB of
 * frames, which with its key and the map's header the kernel allocates
 * from its 2 KiB size class; the map allocates on use, so the cap bounds
 * kernel memory to ~128 MiB (measured: 128.5 MiB for 65536 stacks). */
#define HP_MAX_STACKS 65536

/* Distinct (process, stack) pairs with counts: 48 bytes each, preallocated. */
#define HP_MAX_COUNTS 131072

/* Sampled allocations alive at once, across processes. At the default
 * interval (512 KiB) this covers 128 GiB of sampled live heap; tests at
 * interval 1 keep far fewer objects alive. ~100 bytes each, preallocated. */
#define HP_MAX_LIVE 262144

/* Sampled calls between their entry and return probe, across threads. */
#define HP_MAX_PENDING 16384

/* Allocator images attached (one per process and allocator object), each
 * holding the code ranges of the probed functions (see nested calls). */
#define HP_MAX_IMAGES 4096

/* Probed functions per allocator image (malloc, calloc, realloc, ...,
 * operator new and delete, an allocator's own API): distinct addresses
 * among the rows of alloc_entries.h that one process binds to. glibc with
 * libstdc++ has 29, jemalloc about 34, mimalloc about 50; each costs the
 * images map 16 bytes per image (1 KiB an image at 64). */
#define HP_MAX_FUNCS 64

/* Slots of the per-thread record of the last call of a function that may
 * jump to another (realloc, reallocarray), indexed by thread id modulo
 * this: 32 bytes each, 512 KiB. A record names its thread, so another one
 * never matches it; two threads lose each other's record only if their
 * ids are equal modulo 16384 and both are between the two entries of such
 * a jump at once. The continuation is then counted again, at its right
 * caller, unless a return probe's trampoline marks it (always so in the
 * multi and classic layouts, and for a sampled first call). */
#define HP_THREAD_SLOTS 16384
_Static_assert(HP_IS_POW2(HP_THREAD_SLOTS), "thread_call_of() masks a thread id with it");

/* Pending return probes of one thread passed over while looking for the
 * one that hid a return address: the kernel allows 64 per thread
 * (MAX_URETPROBE_DEPTH), a walk meets them innermost first and reads each
 * once, and more than a few at once means uretprobes on recursive code. */
#define HP_MAX_HIDDEN_RETURNS 16

/* Slots probed for a free place when two stacks hash to one id. */
#define HP_STACK_PROBES 4

/* Processes profiled at once. */
#define HP_MAX_TARGETS 1024

/*
 * The share of the stacks, counts and live maps one process may hold: the
 * report functions of the in-process sampler can be called by the process
 * itself with made-up arguments, and a process controls the stack memory
 * the unwinder reads, so without a bound one process could fill the maps
 * that every profiled process shares. An eighth leaves seven eighths to
 * the others against any one process, and at the default sizes still
 * gives a process 8192 stacks, 16384 (process, stack) rows and 32768 live
 * samples (16 GiB of sampled heap at the default interval), more than the
 * programs we profile take. Maps made so small (--max-*) that an eighth
 * is under HP_SHARE_FLOOR entries are not divided (a share of 0: no
 * bound): they are sized for a test or for one process, an eighth of them
 * would record almost nothing, and their own full-map counters say what
 * was lost.
 */
#define HP_SHARE_DIVISOR 8
#define HP_SHARE_FLOOR 64

/* The entries a process may hold of a map of `capacity` entries; 0: no bound. */
static inline __u32 hp_process_share(__u32 capacity)
{
    __u32 share = capacity / HP_SHARE_DIVISOR;
    return share >= HP_SHARE_FLOOR ? share : 0;
}

/*
 * The share of the stacks, counts and live maps the processes of one owner
 * (real uid) may hold together: an owner may have many processes attached
 * (--max-targets-per-uid), and eight of them at 1/8 each would fill the
 * maps. A quarter leaves three quarters to root and to other owners; a
 * process still holds at most its own eighth. Root's processes have no
 * owner bound (docs/security.md). No bound where maps are too small for a
 * process share.
 */
#define HP_OWNER_SHARE_DIVISOR 4

/* The entries one owner's processes may hold of a map of `capacity`
 * entries; 0: no bound. */
static inline __u32 hp_owner_share(__u32 capacity)
{
    return hp_process_share(capacity) ? capacity / HP_OWNER_SHARE_DIVISOR : 0;
}

/* Processes with a share at once: the targets, those whose counts stay
 * after they exit, and a margin for processes in the middle of being
 * forgotten. 16 bytes and a key each, allocated on use. */
#define HP_MAX_SHARES (4 * HP_MAX_TARGETS)

/* Unwind table rows across all loaded files: 12 bytes each, which the
 * kernel's array map stores 16 bytes apart, preallocated: 32 MiB. Tables
 * take about 21,000-24,000 rows per MiB of code (libc.so.6: 28,274 rows
 * for 1.3 MiB; python3: 64,575 for 2.7 MiB; see
 * tests/bench/unwind_table_bench), so this holds ~85 MiB of code: libc,
 * a large program and dozens of libraries. A file whose table does not fit
 * is unwound by frame pointers, counted in /metrics. */
#define HP_MAX_UNWIND_ROWS_LOG2 21
#define HP_MAX_UNWIND_ROWS (1u << HP_MAX_UNWIND_ROWS_LOG2)

/* Executable file mappings with tables per process (sorted for a binary
 * search in BPF: a power of two). Processes with more code objects than
 * this unwind the rest by frame pointers. */
#define HP_MAX_UNWIND_MAPPINGS_LOG2 8
#define HP_MAX_UNWIND_MAPPINGS (1u << HP_MAX_UNWIND_MAPPINGS_LOG2)

/* Bytes of the main thread's stack above main's caller that the C
 * runtime's start code takes: musl's _start and libc_start_main_stage2
 * take 48 to 56 (a return address, four saved registers, alignment).
 * A walk that cannot go on this close to the stack's start has ended. */
#define HP_START_CODE_BYTES 64

/* Steps of the binary search over one table: a table of n rows needs
 * ceil(log2(n)) of them, and no table is longer than the rows array. */
#define HP_UNWIND_SEARCH_STEPS 22
_Static_assert(HP_UNWIND_SEARCH_STEPS >= HP_MAX_UNWIND_ROWS_LOG2,
               "find_row() must be able to narrow a table as long as the rows array to one row");

/*
 * The in-process sampler's tables (sized in sampler/hp_sampler.h:
 * HP_SAMPLER_SLOTS, HP_FILTER_BUCKETS) are indexed by the top bits of a
 * multiplicative hash, a shift by 64 minus these. The sizes must be these
 * powers of two; tests/unit/test_limits.c checks that they are.
 */
#define HP_SAMPLER_SLOTS_LOG2 10
#define HP_FILTER_BUCKETS_LOG2 13

/*
 * The in-process sampler's ring of freed sampled pointers (sampler/:
 * struct hp_free_ring), which the daemon drains every 100 ms, every 10 ms
 * while a ring was more than a quarter full at the last drain, and at
 * every scrape: 8192 entries of 16 bytes (128 KiB per process). At the
 * default interval a process has one sampled free per ~180 malloc+free
 * pairs on a mixed-size workload, so the ring holds ~1.5 M pairs' frees:
 * at 10 ms drains, 150 M pairs a second, more than one thread makes. A
 * full ring only falls back to the report trap (counted). At
 * --sample-interval 1 every free is sampled and the ring fills after 8192
 * frees between drains: the rest trap, as before the ring.
 */
#define HP_FREE_RING_LOG2 13
#define HP_FREE_RING_SIZE (1u << HP_FREE_RING_LOG2)
/* Ring entries one drain applies in one run of the BPF drain program: the
 * whole ring, read in one process_vm_readv. */
#define HP_DRAIN_BATCH HP_FREE_RING_SIZE

#endif
