/*
 * fuzz_perf_map.c - libFuzzer target for the perf map parser
 * (daemon/symbols/perf_map.c): a JIT runtime's /tmp/perf-PID.map is written
 * by the profiled process, so any text may come.
 *
 * The input is parsed in two pieces split at a point taken from its first
 * byte, as a growing file is read on. Parsing must consume whole lines only
 * and keep the symbols sorted; every lookup (at symbol edges and at
 * addresses taken from the input) must agree with a linear scan for the
 * newest symbol that covers the address.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "perf_map.h"

/* The newest symbol covering addr by a linear scan, or NULL. */
static const struct perf_map_symbol *newest_linear(const struct perf_map *m, uint64_t addr)
{
    const struct perf_map_symbol *best = NULL;
    for (size_t i = 0; i < m->n; i++) {
        const struct perf_map_symbol *s = &m->v[i];
        if (addr >= s->start && addr - s->start < s->size && (!best || s->seq > best->seq))
            best = s;
    }
    return best;
}

/* Checks a lookup at addr against the scan. The scan looks at all symbols,
 * the lookup at PERF_MAP_OVERLAP_SCAN: with more overlaps than that they
 * may differ, and the lookup's answer must still cover addr. */
static void check_lookup(struct perf_map *m, uint64_t addr)
{
    char got[PERF_MAP_MAX_NAME];
    int found = perf_map_lookup(m, addr, got, sizeof(got));
    const struct perf_map_symbol *want = newest_linear(m, addr);
    FUZZ_CHECK(found == (want != NULL) || (found == 0 && m->n > PERF_MAP_OVERLAP_SCAN),
               "lookup(0x%" PRIx64 ") found %d, linear scan %d", addr, found, want != NULL);
    if (found && want && m->n <= PERF_MAP_OVERLAP_SCAN)
        FUZZ_CHECK(strcmp(got, m->names + want->name) == 0,
                   "lookup(0x%" PRIx64 ") gave %s, linear scan %s", addr, got,
                   m->names + want->name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct perf_map *m = perf_map_new(1);
    if (!m)
        return 0;
    const char *text = (const char *)data;
    size_t split = size ? data[0] % (size + 1) : 0;
    long a = perf_map_parse(m, text, split);
    FUZZ_CHECK(a >= 0 && (size_t)a <= split, "first piece: consumed %ld of %zu", a, split);
    FUZZ_CHECK(a == 0 || text[a - 1] == '\n', "first piece ends inside a line at %ld", a);
    long b = perf_map_parse(m, text + a, size - (size_t)a);
    FUZZ_CHECK(b >= 0 && (size_t)b <= size - (size_t)a, "second piece: consumed %ld", b);
    perf_map_sort(m);
    for (size_t i = 1; i < m->n; i++)
        FUZZ_CHECK(m->v[i - 1].start < m->v[i].start ||
                       (m->v[i - 1].start == m->v[i].start && m->v[i - 1].seq < m->v[i].seq),
                   "symbols %zu and %zu out of order", i - 1, i);
    for (size_t i = 0; i < m->n; i++) {
        FUZZ_CHECK(m->v[i].size > 0 && m->v[i].start + m->v[i].size > m->v[i].start,
                   "symbol %zu: empty or wrapping range", i);
        FUZZ_CHECK(strlen(m->names + m->v[i].name) < PERF_MAP_MAX_NAME, "symbol %zu: long name", i);
        check_lookup(m, m->v[i].start);
        check_lookup(m, m->v[i].start + m->v[i].size - 1);
        check_lookup(m, m->v[i].start + m->v[i].size);
        check_lookup(m, m->v[i].start - 1);
    }
    for (size_t at = 0; at < size && at < 64; at += 8)
        check_lookup(m, fuzz_u64_at(data, size, at));
    perf_map_free(m);
    return 0;
}
