/*
 * test_profile_frames.c - return addresses of this very process to pprof
 * locations: allocator frames dropped from the leaf end, every location
 * with a mapping (a file, anonymous memory, or no mapping at all), names
 * with files from DWARF, nothing but addresses under symbolize=0; which
 * lines count as the allocator's; and JIT frames named from a perf map.
 */
#include "check.h"
#include "pprof.h"
#include "pprof_decode.h"
#include "profile_frames.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A function of ours that DWARF names with this file. */
__attribute__((noinline)) int leaf_function(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 3 + 1;
}

/* One stack through the frame table; the profile, encoded and decoded. */
static int build(bool symbolize, const uint64_t *ret, size_t n, size_t *nlocs,
                 struct pprof_decoded *d)
{
    struct symbol_cache cache;
    struct proc_maps maps = {0};
    struct profile_frames *t = NULL;
    struct pprof_buf buf = {0};
    uint64_t locs[8];
    int64_t values[1] = {1};
    symbol_cache_init(&cache);
    struct pprof_profile *p = pprof_new();
    int e = p ? proc_maps_read(getpid(), &maps) : -1;
    if (e == 0)
        e = pprof_add_sample_type(p, "alloc_objects", "count");
    if (e == 0)
        e = profile_frames_new(getpid(), &maps, &cache, p, symbolize, &t);
    if (e == 0)
        e = profile_frames_stack(t, ret, n, locs, nlocs);
    if (e == 0)
        e = pprof_add_sample(p, locs, *nlocs, values, 1, NULL, 0);
    if (e == 0)
        e = profile_frames_finish(t);
    if (e == 0)
        e = pprof_encode(p, &buf);
    if (e == 0)
        e = pprof_decode(buf.data, buf.len, d);
    profile_frames_free(t);
    proc_maps_free(&maps);
    pprof_free(p);
    pprof_buf_free(&buf);
    symbol_cache_destroy(&cache);
    return e;
}

static const struct pprof_decoded_location *location(const struct pprof_decoded *d, uint64_t id)
{
    for (size_t i = 0; i < d->n_locations; i++)
        if (d->locations[i].id == id)
            return &d->locations[i];
    return NULL;
}

static const struct pprof_decoded_mapping *mapping(const struct pprof_decoded *d, uint64_t id)
{
    for (size_t i = 0; i < d->n_mappings; i++)
        if (d->mappings[i].id == id)
            return &d->mappings[i];
    return NULL;
}

static const struct pprof_decoded_function *function(const struct pprof_decoded *d, uint64_t id)
{
    for (size_t i = 0; i < d->n_functions; i++)
        if (d->functions[i].id == id)
            return &d->functions[i];
    return NULL;
}

/* A stack: malloc (the allocator, at the leaf), a function of ours, an
 * address in anonymous memory, and one in no mapping (page 0). */
static void the_stack(uint64_t ret[4], void *anon)
{
    /* libc's malloc, not a sanitizer's interceptor of it */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    ret[0] = (uint64_t)(uintptr_t)(libc ? dlsym(libc, "malloc") : NULL) + 5;
    if (libc)
        dlclose(libc);
    ret[1] = (uint64_t)(uintptr_t)&leaf_function + 2;
    ret[2] = (uint64_t)(uintptr_t)anon + 17;
    ret[3] = 0x11;
}

static void every_location_has_a_mapping_and_the_allocator_goes(void)
{
    void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(anon != MAP_FAILED);
    uint64_t ret[4];
    the_stack(ret, anon);
    struct pprof_decoded d = {0};
    size_t n = 0;
    CHECK_INT_EQ(build(true, ret, 4, &n, &d), 0);
    CHECK_INT_EQ(n, 3); /* malloc dropped */
    CHECK_INT_EQ(d.n_samples, 1);
    for (size_t i = 0; d.n_samples == 1 && i < d.samples[0].n_locations; i++) {
        const struct pprof_decoded_location *l = location(&d, d.samples[0].location_ids[i]);
        CHECK(l != NULL);
        if (!l)
            continue;
        const struct pprof_decoded_mapping *m = mapping(&d, l->mapping_id);
        CHECK(m != NULL);
        if (!m)
            continue;
        CHECK(l->address >= m->start && (m->limit == 0 || l->address < m->limit));
        if (i == 0) { /* ours: named from DWARF, with this file */
            CHECK(l->n_lines >= 1);
            const struct pprof_decoded_function *f =
                l->n_lines ? function(&d, l->lines[0].function_id) : NULL;
            CHECK(f != NULL);
            if (f) {
                CHECK_STR_EQ(pprof_decoded_str(&d, f->name), "leaf_function");
                CHECK(strstr(pprof_decoded_str(&d, f->filename), "test_profile_frames.c"));
            }
            CHECK(pprof_decoded_str(&d, m->build_id)[0] != '\0');
        } else { /* anonymous memory, then no mapping: no names, honest flags */
            CHECK_INT_EQ(l->n_lines, 0);
            CHECK_STR_EQ(pprof_decoded_str(&d, m->filename), "");
            CHECK(!m->has_functions && !m->has_filenames);
        }
    }
    pprof_decoded_free(&d);
    munmap(anon, 4096);
}

static void symbolize_0_keeps_addresses_and_mappings_only(void)
{
    void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t ret[4];
    the_stack(ret, anon);
    struct pprof_decoded d = {0};
    size_t n = 0;
    CHECK_INT_EQ(build(false, ret, 4, &n, &d), 0);
    CHECK_INT_EQ(n, 3); /* the allocator's frame still goes */
    CHECK_INT_EQ(d.n_functions, 0);
    for (size_t i = 0; i < d.n_locations; i++) {
        CHECK_INT_EQ(d.locations[i].n_lines, 0);
        CHECK(mapping(&d, d.locations[i].mapping_id) != NULL);
    }
    for (size_t i = 0; i < d.n_mappings; i++)
        CHECK(!d.mappings[i].has_functions && !d.mappings[i].has_inline_frames);
    pprof_decoded_free(&d);
    munmap(anon, 4096);
}

/* The function name and file of location `id`'s innermost line, or "". */
static void name_of(const struct pprof_decoded *d, uint64_t id, const char **name,
                    const char **file)
{
    const struct pprof_decoded_location *l = location(d, id);
    const struct pprof_decoded_function *f =
        l && l->n_lines ? function(d, l->lines[0].function_id) : NULL;
    *name = f ? pprof_decoded_str(d, f->name) : "";
    *file = f ? pprof_decoded_str(d, f->filename) : "";
}

/*
 * JIT code: an anonymous executable mapping of ours, part of it named by a
 * perf map /tmp/perf-PID.map that this test writes for itself. A named
 * frame gets the map's name, an unnamed one the runtime's ("[jit
 * test_profile_frames]"), both the file "[jit]"; an address in no mapping
 * is named only if the map knows it.
 */
static void jit_frames_are_named_from_the_perf_map_or_after_the_runtime(void)
{
    uint8_t *code = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(code != MAP_FAILED);
    if (code == MAP_FAILED)
        return;
    uint64_t base = (uint64_t)(uintptr_t)code, gone = 0x2000; /* below mmap_min_addr */
    char path[64], text[256];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
    snprintf(text, sizeof(text), "%llx 100 JS:*jitted_function /app/x.js:3\n%llx 40 freed_code\n",
             (unsigned long long)(base + 0x100), (unsigned long long)gone);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    uint64_t ret[4] = {base + 0x181, base + 0x1001, gone + 0x11, gone + 0x801};
    struct pprof_decoded d = {0};
    size_t n = 0;
    CHECK_INT_EQ(build(true, ret, 4, &n, &d), 0);
    CHECK_INT_EQ(n, 4);
    const char *name, *file;
    const char *want_unnamed[] = {"[jit test_profile_frames]", "[jit test_profile_frames_asan]"};
    for (size_t i = 0; d.n_samples == 1 && i < 4 && i < d.samples[0].n_locations; i++) {
        name_of(&d, d.samples[0].location_ids[i], &name, &file);
        if (i == 0) {
            CHECK_STR_EQ(name, "JS:*jitted_function /app/x.js:3");
            CHECK_STR_EQ(file, "[jit]");
        } else if (i == 1) {
            CHECK(strcmp(name, want_unnamed[0]) == 0 || strcmp(name, want_unnamed[1]) == 0);
            CHECK_STR_EQ(file, "[jit]");
        } else if (i == 2) {
            CHECK_STR_EQ(name, "freed_code");
        } else {
            CHECK_STR_EQ(name, ""); /* in no mapping and not in the map: an address */
        }
    }
    pprof_decoded_free(&d);
    unlink(path);
    munmap(code, 8192);
}

static void allocator_lines_are_told_by_name(void)
{
    static const struct {
        const char *name, *system_name;
        int allocator;
    } cases[] = {
        {"malloc", "malloc", 1},
        {"__GI___libc_malloc", "__GI___libc_malloc", 1},
        {"operator new", "operator new(unsigned long)", 1},
        {"operator new[]", "operator new[](unsigned long, std::nothrow_t const&)", 1},
        {"operator new", "operator new(unsigned long, std::align_val_t)", 1},
        {"Pool::operator new", "Pool::operator new(unsigned long)", 1},
        {"__rust_alloc", "__rust_alloc", 1},
        {"__rustc::__rust_alloc_zeroed", "__rustc::__rust_alloc_zeroed", 1},
        {"std::alloc::__default_lib_allocator::__rdl_alloc",
         "std::alloc::__default_lib_allocator::__rdl_alloc", 1},
        {"__rg_realloc", "__rg_realloc", 1},
        {"operator delete", "operator delete(void*)", 0},
        {"alloc::raw_vec::finish_grow", "alloc::raw_vec::finish_grow", 0},
        {"std::vector::_M_realloc_insert", "void std::vector<int>::_M_realloc_insert<int>()", 0},
        {"newt_alloc", "newt_alloc", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sym_line l = {
            .name = (char *)cases[i].name, .system_name = (char *)cases[i].system_name, .file = ""};
        if (profile_frames_is_allocator_line(&l) != cases[i].allocator)
            fprintf(stderr, "  %s\n", cases[i].system_name);
        CHECK_INT_EQ(profile_frames_is_allocator_line(&l), cases[i].allocator);
    }
}

int main(void)
{
    CHECK_INT_EQ(leaf_function(1), 4);
    RUN_TEST(every_location_has_a_mapping_and_the_allocator_goes);
    RUN_TEST(symbolize_0_keeps_addresses_and_mappings_only);
    RUN_TEST(allocator_lines_are_told_by_name);
    RUN_TEST(jit_frames_are_named_from_the_perf_map_or_after_the_runtime);
    return check_exit_code();
}
