/*
 * fuzz_proc_maps.c - libFuzzer target for the /proc/PID/maps parser
 * (daemon/process/proc_maps.c).
 *
 * Any text goes to proc_maps_parse(). A refusal must leave the output
 * untouched; an accepted text must give what proc_maps.h promises: at most
 * one mapping per line, start < end, sorted by start and not overlapping (so
 * that proc_maps_find()'s binary search is right), and a text that, printed
 * back in the kernel's format, parses to the same mappings. proc_maps_find()
 * is compared with a linear scan at every mapping's edges and at addresses
 * taken from the input.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "proc_maps.h"

/* The mapping holding `addr` by a linear scan, or NULL. */
static const struct proc_mapping *find_linear(const struct proc_maps *m, uint64_t addr)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].start <= addr && addr < m->v[i].end)
            return &m->v[i];
    return NULL;
}

/* Checks proc_maps_find() against the linear scan at `addr`. */
static void check_find(const struct proc_maps *m, uint64_t addr)
{
    const struct proc_mapping *got = proc_maps_find(m, addr), *want = find_linear(m, addr);
    FUZZ_CHECK(got == want, "find(0x%" PRIx64 ") gave mapping %td, linear scan %td", addr,
               got ? got - m->v : -1, want ? want - m->v : -1);
}

/* The number of lines in the text: '\n'-separated, a last line without '\n' counted. */
static size_t count_lines(const uint8_t *data, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n + (size > 0 && data[size - 1] != '\n');
}

/* Prints the mappings back as the kernel would; returns a malloc'd text and its length. */
static char *print_maps(const struct proc_maps *m, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;
    for (size_t i = 0; i < m->n; i++) {
        const struct proc_mapping *pm = &m->v[i];
        fprintf(f, "%" PRIx64 "-%" PRIx64 " %c%c%c%c %08" PRIx64 " %02x:%02x %" PRIu64 " %s%s\n",
                pm->start, pm->end, pm->readable ? 'r' : '-', pm->writable ? 'w' : '-',
                pm->executable ? 'x' : '-', pm->shared ? 's' : 'p', pm->offset, pm->dev_major,
                pm->dev_minor, pm->inode, pm->path, pm->deleted ? " (deleted)" : "");
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Whether two mappings have the same fields. */
static int same_mapping(const struct proc_mapping *a, const struct proc_mapping *b)
{
    return a->start == b->start && a->end == b->end && a->offset == b->offset &&
           a->inode == b->inode && a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
           a->readable == b->readable && a->writable == b->writable &&
           a->executable == b->executable && a->shared == b->shared && a->deleted == b->deleted &&
           strcmp(a->path, b->path) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct proc_maps m = {(struct proc_mapping *)&m, 12345};
    int err = proc_maps_parse((const char *)data, size, &m);
    if (err) {
        FUZZ_CHECK(err == -EINVAL || err == -ENOMEM, "error %d", err);
        FUZZ_CHECK(m.v == (struct proc_mapping *)&m && m.n == 12345, "output changed on error");
        return 0;
    }

    /* One mapping per line, less the lines an overlapping later line replaced. */
    size_t lines = count_lines(data, size);
    FUZZ_CHECK(m.n <= lines && (m.n > 0) == (lines > 0), "%zu mappings from %zu lines", m.n, lines);
    for (size_t i = 0; i < m.n; i++) {
        const struct proc_mapping *pm = &m.v[i];
        FUZZ_CHECK(pm->start < pm->end, "mapping %zu: 0x%" PRIx64 "-0x%" PRIx64, i, pm->start,
                   pm->end);
        FUZZ_CHECK(pm->path != NULL, "mapping %zu has no path", i);
        FUZZ_CHECK(proc_mapping_is_file(pm) == (pm->path[0] == '/'), "mapping %zu: is_file", i);
        if (i > 0)
            FUZZ_CHECK(m.v[i - 1].end <= pm->start,
                       "mapping %zu (0x%" PRIx64 "-0x%" PRIx64 ") not after %zu (0x%" PRIx64
                       "-0x%" PRIx64 ")",
                       i, pm->start, pm->end, i - 1, m.v[i - 1].start, m.v[i - 1].end);
        check_find(&m, pm->start);
        check_find(&m, pm->end - 1);
        check_find(&m, pm->end);
        if (pm->start > 0)
            check_find(&m, pm->start - 1);
    }
    for (size_t at = 0; at < size && at < 64; at += 8)
        check_find(&m, fuzz_u64_at(data, size, at));

    /* Printed back in the kernel's format, the mappings parse to themselves. */
    size_t len = 0;
    char *text = print_maps(&m, &len);
    if (text) {
        struct proc_maps again = {0};
        err = proc_maps_parse(text, len, &again);
        FUZZ_CHECK(err == 0, "reparsing the printed maps failed with %d:\n%s", err, text);
        FUZZ_CHECK(again.n == m.n, "%zu mappings reparsed, %zu parsed", again.n, m.n);
        for (size_t i = 0; i < m.n; i++)
            FUZZ_CHECK(same_mapping(&m.v[i], &again.v[i]), "mapping %zu differs after reprint", i);
        proc_maps_free(&again);
        free(text);
    }
    proc_maps_free(&m);
    FUZZ_CHECK(m.v == NULL && m.n == 0, "proc_maps_free left the struct non-empty");
    return 0;
}
