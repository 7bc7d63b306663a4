/*
 * entry_families.c - which family an allocator entry point belongs to
 * (see entry_families.h). By name, so that both samplers' lists (the
 * probed functions, the sampler's slots) map through the one table, and a
 * new entry falls into its family by its prefix without a change here.
 */
#include "entry_families.h"

#include <stdio.h>
#include <string.h>

_Static_assert(ENTRY_FAMILY_COUNT <= 32, "a family is a bit of a uint32_t mask");

static const char *const family_names[ENTRY_FAMILY_COUNT] = {
    [ENTRY_FAMILY_C] = "c",
    [ENTRY_FAMILY_CXX] = "cxx",
    [ENTRY_FAMILY_JEMALLOC] = "jemalloc",
    [ENTRY_FAMILY_TCMALLOC] = "tcmalloc",
    [ENTRY_FAMILY_MIMALLOC] = "mimalloc",
};

/* Names that begin a family: the mangled operators (_Znw/_Zna: new and
 * new[], _Zdl/_Zda: delete and delete[]), the prefixed APIs, and
 * jemalloc's non-standard functions, which have no prefix. */
static const struct {
    const char *prefix;
    enum entry_family family;
} prefixes[] = {
    {"_Znw", ENTRY_FAMILY_CXX},      {"_Zna", ENTRY_FAMILY_CXX},
    {"_Zdl", ENTRY_FAMILY_CXX},      {"_Zda", ENTRY_FAMILY_CXX},
    {"je_", ENTRY_FAMILY_JEMALLOC},  {"_rjem_", ENTRY_FAMILY_JEMALLOC},
    {"mallocx", ENTRY_FAMILY_JEMALLOC}, {"rallocx", ENTRY_FAMILY_JEMALLOC},
    {"xallocx", ENTRY_FAMILY_JEMALLOC}, {"sallocx", ENTRY_FAMILY_JEMALLOC},
    {"dallocx", ENTRY_FAMILY_JEMALLOC}, {"sdallocx", ENTRY_FAMILY_JEMALLOC},
    {"nallocx", ENTRY_FAMILY_JEMALLOC}, {"tc_", ENTRY_FAMILY_TCMALLOC},
    {"mi_", ENTRY_FAMILY_MIMALLOC},
};

/* Entries followed for the modules they load, which allocate nothing. */
static const char *const not_allocating[] = {"dlopen", "dlmopen", "dl_iterate_phdr"};

int entry_family_of(const char *name)
{
    if (!name || !*name)
        return -1;
    for (size_t i = 0; i < sizeof(not_allocating) / sizeof(not_allocating[0]); i++)
        if (strcmp(name, not_allocating[i]) == 0)
            return -1;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(name, prefixes[i].prefix, strlen(prefixes[i].prefix)) == 0)
            return (int)prefixes[i].family;
    return ENTRY_FAMILY_C;
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
