/*
 * hp_sampler.h - the contract between the in-process sampler (sampler.c,
 * injected into a profiled process) and the daemon that injects it
 * (daemon/inject/): the layout of the sampler's configuration block, the
 * names of its symbols, and the version both must agree on.
 *
 * Plain fixed-width types only: the sampler is built without libc.
 */
#ifndef HEAPPROF_HP_SAMPLER_H
#define HEAPPROF_HP_SAMPLER_H

#include <linux/types.h>

#include "hp_limits.h"
#include "sampling_math.h"

/* "hpsampl" and a version: a restarted daemon adopts a sampler only of the
 * layout it knows, and patches a process only with its own. Bump the
 * version whenever struct hp_sampler_config or a symbol's meaning changes. */
#define HP_SAMPLER_MAGIC 0x6c706d6173706800ULL
#define HP_SAMPLER_VERSION 1

/* The name of the memfd the sampler is mapped from: /proc/PID/maps shows
 * "/memfd:heapprofd-sampler (deleted)", which is how a restarted daemon
 * finds a sampler already in a process. */
#define HP_SAMPLER_MEMFD_NAME "heapprofd-sampler"

/* Threads share countdown slots found by a hash of their thread pointer:
 * 1024 slots of one cache line each (64 KiB). Two threads in one slot only
 * share a countdown, which stays unbiased (waits are memoryless). */
#define HP_SAMPLER_SLOTS 1024

/* The filter of sampled pointers still alive: 8192 buckets of 8 pointers
 * (one cache line each, 512 KiB), and a byte per bucket saying how many it
 * holds (8 KiB, small enough to stay in cache, so that freeing an unsampled
 * pointer costs one load). At the default interval a process has about one
 * live sample per 512 KiB of heap: 16 GiB of heap fill a quarter of it. */
#define HP_FILTER_BUCKETS 8192
#define HP_FILTER_WAYS 8
/* A bucket that overflowed: every free hashing to it is reported (the BPF
 * side looks the pointer up), so nothing is missed, only slower. */
#define HP_FILTER_SATURATED 0xff

/* What the daemon writes into the sampler before it patches any entry. */
struct hp_sampler_config {
    __u64 magic;          /* HP_SAMPLER_MAGIC once configured */
    __u32 version;        /* HP_SAMPLER_VERSION */
    __u32 enabled;        /* 0: every wrapper only forwards */
    __u64 sample_interval;
    __u64 self_lo, self_hi;   /* the sampler's code: calls from it are nested */
    __u64 alloc_lo, alloc_hi; /* the envelope of the allocator's functions */
    __u32 nranges;
    __u32 pad;
    __u64 range_lo[HP_MAX_FUNCS]; /* each patched function's code */
    __u64 range_hi[HP_MAX_FUNCS];
    __u32 log2_table[HP_LOG2_TABLE_LEN]; /* as the BPF side's (sampling_math.h) */
};

/* Symbols of the sampler the daemon looks up by name. For each allocator
 * function NAME: the wrapper its entry jumps to, "hp_wrap_NAME", and the
 * trampoline slot that runs its displaced first instructions and jumps
 * back, "hp_tramp_NAME" (HP_TRAMP_SIZE bytes of int3 until written). */
#define HP_SAMPLER_CONFIG_SYM "hp_sampler_config"
#define HP_REPORT_ALLOC_SYM "hp_report_alloc"
#define HP_REPORT_FREE_SYM "hp_report_free"
#define HP_WRAP_PREFIX "hp_wrap_"
#define HP_TRAMP_PREFIX "hp_tramp_"
#define HP_TRAMP_SIZE 64

#endif
