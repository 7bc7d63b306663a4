/*
 * handshake.h - the line protocol every test workload speaks on stdio.
 *
 * A workload prints "ready <pid>", waits for a line ("go") on stdin, does its
 * scripted allocations, prints "done", and waits for another line (or EOF)
 * before it exits. The test attaches the profiler between "ready" and "go",
 * so everything the workload does after "go" is seen.
 *
 * handshake_touch() is the one helper they share for their blocks.
 *
 * These functions use read(2) and write(2) directly, never stdio: stdio
 * allocates its buffers lazily with malloc, and such allocations would land in
 * the profiles the tests check exactly.
 */
#ifndef HEAPPROF_WORKLOAD_HANDSHAKE_H
#define HEAPPROF_WORKLOAD_HANDSHAKE_H

#include <stddef.h>

/* Writes "ready <pid>\n" to stdout. */
void handshake_ready(void);

/* Blocks until a whole line arrives on stdin; returns 1 for a line, 0 at EOF. */
int handshake_wait_line(void);

/* Writes "done\n" to stdout. */
void handshake_done(void);

/* Writes a message and exits with status 2; for impossible failures. */
void handshake_die(const char *message);

/* Writes the first and last byte of a block of `size` bytes just
 * allocated, so that no allocation is dead code; exits with status 2 if
 * `p` is NULL (the allocation failed). */
void handshake_touch(void *p, size_t size);

#endif
