/*
 * readelf_frames.h - the rows `readelf --debug-dump=frames-interp` prints for
 * a file, as the oracle of test_unwind_table.c. readelf interprets CFI with
 * its own code (binutils), so agreeing with it says more than agreeing with
 * libdw, which our builder uses to split sections into entries.
 *
 * Ownership: readelf_frames() fills a `struct frows` the caller frees with
 * frows_free().
 */
#ifndef HEAPPROF_READELF_FRAMES_H
#define HEAPPROF_READELF_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One row as readelf prints it: the rules for [lo, hi), as text ("rsp+16", "c-16", "u", "exp"). */
struct frow {
    uint64_t lo, hi;
    char cfa[32]; /* CFA column */
    char rbp[32]; /* rbp column; "u" when readelf has no such column for the FDE */
    char ra[32];  /* return address column */
    bool signal;  /* the FDE's CIE has the 'S' augmentation */
};

/* All rows of one file, FDE by FDE, .eh_frame then .debug_frame. */
struct frows {
    struct frow *v;
    size_t n, cap;
};

/*
 * Runs readelf on `path` and collects every FDE row; an FDE that prints no
 * rows of its own gets its CIE's initial row over its whole range. 0, or
 * -ENOENT if readelf printed no rows.
 */
int readelf_frames(const char *path, struct frows *out);

void frows_free(struct frows *rs);

#endif
