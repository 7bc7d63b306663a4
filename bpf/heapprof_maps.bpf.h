// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * heapprof_maps.bpf.h - the BPF maps of heapprof.bpf.c and the files it
 * includes, declared in one place (libbpf-tools style), and the per-CPU
 * error and event counters (count_stat). Included by every header of
 * heapprof.bpf.c that reaches a map.
 */
#ifndef HEAPPROF_MAPS_BPF_H
#define HEAPPROF_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "heapprof.h"
#include "hp_limits.h"
#include "unwind_row.h"

/* This CPU's sampling countdown, and the kind of the last allocation
 * entry seen on it: after a malloc, the next entry on this CPU is seldom a
 * call the allocator made itself, so it skips those checks (on_alloc_entry). */
struct cpu_state {
    __u64 countdown;
    __u32 last_kind;
    __u32 initialized;
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct cpu_state);
} cpu_states SEC(".maps");

/* A thread's last call of a function that may jump to another (realloc,
 * reallocarray): the jump enters the next function with the same stack
 * pointer and return address. Kept per thread, not per CPU, so that a
 * thread switched out or moved between the two entries is still known. */
struct thread_call {
    __u64 pid_tgid; /* the thread; another one sharing the slot never matches */
    __u64 sp;
    __u64 ret;
    __u32 kind;
    __u32 pad;
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, HP_THREAD_SLOTS);
    __type(key, __u32);
    __type(value, struct thread_call);
} thread_calls SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, HP_STAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

/* Where a stack is built before it is stored. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct hp_stack);
} stack_scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_STACKS);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u64);
    __type(value, struct hp_stack);
} stacks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_COUNTS);
    __type(key, struct hp_count_key);
    __type(value, struct hp_counts);
} counts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_LIVE);
    __type(key, struct hp_live_key);
    __type(value, struct hp_live);
} live SEC(".maps");

/* What each process holds of the maps above (see hp_process_share). Not
 * pinned: the daemon counts it again from the pinned maps at load. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_SHARES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u32);
    __type(value, struct hp_share);
} shares SEC(".maps");

/* What each owner's (real uid's) processes hold together (hp_owner_share):
 * the sum of their share records, which name the owner. As many entries
 * as share records, so every owner has room; the daemon deletes an
 * owner's record once it holds nothing. Not pinned, like shares. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_SHARES);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u32);
    __type(value, struct hp_share);
} owner_shares SEC(".maps");

/* The processes on the in-process sampler whose reports count. The report
 * probes are attached once, for every process that maps the shared
 * sampler file (docs/sampler.md): a process that maps it without being
 * attached (a forked child not yet attached, one detached, one that maps
 * the file itself) is not in this map, and its reports are dropped. Not
 * pinned: a restarted daemon adds its targets again as it adopts them. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_SHARES);
    __type(key, __u32);
    __type(value, __u32);
} reporting SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_PENDING);
    __type(key, struct hp_pending_key);
    __type(value, struct hp_pending);
} pending SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, HP_MAX_IMAGES);
    __type(key, __u32);
    __type(value, struct hp_image);
} images SEC(".maps");

/* Userspace only, pinned: what the other pinned maps were made with, and
 * the processes to attach again after a restart. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct hp_meta);
} meta SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, HP_MAX_TARGETS);
    __type(key, __u32);
    __type(value, struct hp_persisted_target);
} persisted_targets SEC(".maps");

/* The rows of every loaded unwind table, each table a contiguous range. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, HP_MAX_UNWIND_ROWS);
    __type(key, __u32);
    __type(value, struct hp_unwind_row);
} unwind_rows SEC(".maps");

/* Per process: its executable mappings that have tables. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_TARGETS);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u32);
    __type(value, struct hp_unwind_proc);
} unwind_procs SEC(".maps");

/* Per target slot (the attach cookie's image slot): probe programs run,
 * entries and returns, each a trap into the kernel: what the cost estimate
 * multiplies by the calibrated cost of one. Per CPU, so a plain add; the
 * daemon zeroes a slot before it gives the slot to a process. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, HP_MAX_TARGETS + 1);
    __type(key, __u32);
    __type(value, __u64);
} target_hits SEC(".maps");

/* Counts one probe hit for the target whose slot `cookie` carries. */
static __always_inline void count_hit(__u64 cookie)
{
    __u32 slot = HP_COOKIE_IMAGE(cookie);
    __u64 *h = bpf_map_lookup_elem(&target_hits, &slot);
    if (h)
        *h += 1;
}

static __always_inline void count_stat(__u32 stat)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &stat);
    if (v)
        *v += 1;
}

/* count_stat by `n`, atomically: from the drain program, which may be
 * preempted on its CPU. */
static __always_inline void count_stat_n(__u32 stat, __u64 n)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &stat);
    if (v)
        __sync_fetch_and_add(v, n);
}

#endif
