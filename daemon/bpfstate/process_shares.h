/*
 * process_shares.h - the per-process bound on the shared maps, as the
 * loader sets it up (bpf_state.c): the bounds put into the programs'
 * read-only data, and the shares of adopted maps counted. Pruning, which
 * the rest of the daemon calls, is declared in bpf_state.h. Also the
 * owners' records (the sum per real uid) kept in step when a process's
 * record goes.
 */
#ifndef HEAPPROF_PROCESS_SHARES_H
#define HEAPPROF_PROCESS_SHARES_H

#include <stdint.h>

struct heapprof; /* the skeleton */

/* Sets the share of each map (hp_process_share and hp_owner_share of the
 * size the map got) in the programs' read-only data; before load. */
void process_shares_set_bounds(struct heapprof *skel);

/* Counts what each process holds of the counts and live maps into the
 * shares map, which is not pinned: after load, when pinned maps were
 * adopted (no program runs on them yet), so that their processes' shares
 * start where they are. 0 or -errno. */
int process_shares_count(struct heapprof *skel);

/* Deletes the share record of process `tgid`, if any, and takes what it
 * held out of its owner's record (deleted once it holds nothing). */
void process_shares_drop(struct heapprof *skel, uint32_t tgid);

#endif
