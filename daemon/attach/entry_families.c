/*
 * entry_families.c - which family an allocator entry point belongs to
 * (see entry_families.h). By name, so that both samplers' lists (the
 * probed functions, the sampler's slots) map through the one list of
 * entries, bpf/alloc_entries.h, whose family column this reads.
 */
#include "entry_families.h"

#include <stdio.h>
#include <string.h>

#include "alloc_entries.h"

_Static_assert(ENTRY_FAMILY_COUNT <= 32, "a family is a bit of a uint32_t mask");

static const char *const family_names[ENTRY_FAMILY_COUNT] = {
    [ENTRY_FAMILY_C] = "c",
    [ENTRY_FAMILY_CXX] = "cxx",
    [ENTRY_FAMILY_JEMALLOC] = "jemalloc",
    [ENTRY_FAMILY_TCMALLOC] = "tcmalloc",
    [ENTRY_FAMILY_MIMALLOC] = "mimalloc",
};

/* The family column of alloc_entries.h, as this enum numbers it. */
_Static_assert(HP_FAMILY_C == ENTRY_FAMILY_C + 1 && HP_FAMILY_CXX == ENTRY_FAMILY_CXX + 1 &&
                   HP_FAMILY_JEMALLOC == ENTRY_FAMILY_JEMALLOC + 1 &&
                   HP_FAMILY_TCMALLOC == ENTRY_FAMILY_TCMALLOC + 1 &&
                   HP_FAMILY_MIMALLOC == ENTRY_FAMILY_MIMALLOC + 1,
               "entry_family is alloc_entries.h's family less one (the loader's)");

static const struct {
    const char *name;
    int family;
} rows[] = {
#define FAMILY_ROW(sym, kind, family) {#sym, (family)-1},
    HP_ALLOC_ENTRIES(FAMILY_ROW)
#undef FAMILY_ROW
};

int entry_family_of(const char *name)
{
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (strcmp(name, rows[i].name) == 0)
            return rows[i].family; /* -1 for the loader's entries */
    return -1;
}

const char *entry_family_name(enum entry_family f)
{
    return (unsigned)f < ENTRY_FAMILY_COUNT ? family_names[f] : "?";
}

void entry_families_describe(uint32_t mask, const char *sep, char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (int f = 0; f < ENTRY_FAMILY_COUNT && used < len; f++) {
        if (!(mask & (1u << f)))
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? sep : "", family_names[f]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}
