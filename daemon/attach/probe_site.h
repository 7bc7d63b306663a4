/*
 * probe_site.h - chooses where in an allocator function its entry probe
 * goes, so that the kernel emulates the probed instruction instead of
 * single-stepping it out of line (about 12x dearer: ~9,600 ns against ~770
 * ns per call here).
 *
 * x86_64 uprobes emulate pushes of a register and relative branches
 * (jmp, jcc, call); most other instructions are single-stepped. Many fast
 * paths start with a test or a move before their first branch (glibc's free:
 * `test %rdi,%rdi; je`; jemalloc's malloc: `cmp $0x1000,%rdi; ja`). We skip
 * such a straight-line prefix when every instruction in it is one we decode,
 * writes no register the probe reads (%rsp, %rbp, and the arguments of the
 * function's kind) and no memory, and no branch in the function lands inside
 * it. Anything else keeps the probe on the function's entry.
 */
#ifndef HEAPPROF_PROBE_SITE_H
#define HEAPPROF_PROBE_SITE_H

#include <stddef.h>
#include <stdint.h>

#include "heapprof.h"

/* Instructions skipped at most: a fast path's first branch comes early
 * (jemalloc's free has ten instructions of address arithmetic before it). */
#define PROBE_SITE_MAX_SKIPPED 12

/* Where the probe goes, and why. */
struct probe_site {
    size_t offset;      /* from the function's entry */
    int emulated;       /* the instruction there is one the kernel emulates */
    const char *reason; /* a static string for the log */
};

/*
 * Chooses the probe site in `code`, the whole function (`len` bytes, its
 * symbol size; a shorter read is fine: branches beyond it are not seen, so
 * then only the entry or an emulated first instruction is chosen).
 */
void probe_site_choose(const uint8_t *code, size_t len, enum hp_kind kind, int whole_function,
                       struct probe_site *out);

#endif
