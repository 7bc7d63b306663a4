/*
 * row_index.h - which count rows each process has, kept by the daemon so
 * that reading one process's counts costs its own rows, not every row of
 * every process (issue 32).
 *
 * Rows (tgid, stack) are made only by the BPF programs and deleted only
 * when the daemon forgets a process, and each row made is counted in the
 * process's share record (hp_share.rows, bpf/sample_store.bpf.h). So the
 * stack ids of a process's rows, once seen by a walk of the counts map,
 * stay valid, and the share's count says whether any was made since: when
 * the index knows at least that many, the rows are read by key, else the
 * map is walked once and the index refreshed for every process at once.
 * Not for other folders: they reach the maps through bpf_state.h.
 */
#ifndef HEAPPROF_ROW_INDEX_H
#define HEAPPROF_ROW_INDEX_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* The stack ids of one process's rows. */
struct row_list {
    uint32_t tgid;
    size_t n, cap;
    uint64_t *ids;
};

/* The index: every field under `lock`, held only to copy lists in or out
 * (never across a system call), so requests reading it do not wait on
 * each other's walks. */
struct row_index {
    pthread_mutex_t lock;
    struct row_list *lists;
    size_t n, cap;
};

void row_index_init(struct row_index *ri);
void row_index_destroy(struct row_index *ri);

/* A copy of the stack ids of `tgid`'s rows into *ids (malloc'd, the
 * caller frees) and *n, if the index knows at least `rows` of them: 0;
 * else -ENOENT (walk the map), or -ENOMEM. */
int row_index_get(struct row_index *ri, uint32_t tgid, size_t rows, uint64_t **ids, size_t *n);

/* Takes `lists` (n of them, from a walk of the whole map, which it
 * frees) as what every process has: the lists of processes not in it
 * are dropped (they have no rows). */
void row_index_replace(struct row_index *ri, struct row_list *lists, size_t n);

/* Drops what the index knows of `tgid` (forgotten: its rows are gone). */
void row_index_forget(struct row_index *ri, uint32_t tgid);

/* Appends `id` to `l`; -ENOMEM. */
int row_list_add(struct row_list *l, uint64_t id);

#endif
