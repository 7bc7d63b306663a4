/*
 * test_entry_families.c - the families of allocator entry points
 * (entry_families.h): each entry of the C API, C++'s operators and the
 * allocators' own APIs falls into its family by name, dlopen into none,
 * and a mask is written as the index writes it.
 */
#include <string.h>

#include "check.h"
#include "entry_families.h"

static void the_c_entries_are_one_family(void)
{
    const char *c[] = {"malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
                       "aligned_alloc", "memalign", "valloc", "pvalloc", "free", "free_sized",
                       "free_aligned_sized"};
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        CHECK_INT_EQ(entry_family_of(c[i]), ENTRY_FAMILY_C);
}

static void every_form_of_new_and_delete_is_cxx(void)
{
    const char *cxx[] = {"_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZnwmSt11align_val_t",
                         "_ZnwmRKSt9nothrow_t", "_ZdlPvmSt11align_val_t",
                         "_ZnamSt11align_val_tRKSt9nothrow_t"};
    for (size_t i = 0; i < sizeof(cxx) / sizeof(cxx[0]); i++)
        CHECK_INT_EQ(entry_family_of(cxx[i]), ENTRY_FAMILY_CXX);
}

static void the_allocators_own_apis_are_theirs(void)
{
    const char *je[] = {"mallocx", "rallocx", "xallocx", "sdallocx", "dallocx"};
    for (size_t i = 0; i < sizeof(je) / sizeof(je[0]); i++)
        CHECK_INT_EQ(entry_family_of(je[i]), ENTRY_FAMILY_JEMALLOC);
    CHECK_INT_EQ(entry_family_of("tc_malloc"), ENTRY_FAMILY_TCMALLOC);
    CHECK_INT_EQ(entry_family_of("tc_free"), ENTRY_FAMILY_TCMALLOC);
    CHECK_INT_EQ(entry_family_of("mi_malloc"), ENTRY_FAMILY_MIMALLOC);
    CHECK_INT_EQ(entry_family_of("mi_free"), ENTRY_FAMILY_MIMALLOC);
}

static void the_loaders_entries_and_names_of_no_entry_allocate_nothing(void)
{
    /* Not rows of alloc_entries.h: no Debian library exports them. */
    CHECK_INT_EQ(entry_family_of("je_malloc"), -1);
    CHECK_INT_EQ(entry_family_of("__libc_malloc"), -1);
    CHECK_INT_EQ(entry_family_of("dlopen"), -1);
    CHECK_INT_EQ(entry_family_of("dlmopen"), -1);
    CHECK_INT_EQ(entry_family_of("dl_iterate_phdr"), -1);
    CHECK_INT_EQ(entry_family_of(""), -1);
    CHECK_INT_EQ(entry_family_of(NULL), -1);
}

static void a_mask_is_written_in_family_order_and_cut_to_fit(void)
{
    char buf[64];
    entry_families_describe(0, ", ", buf, sizeof(buf));
    CHECK_STR_EQ(buf, "");
    entry_families_describe((1u << ENTRY_FAMILY_MIMALLOC) | (1u << ENTRY_FAMILY_C) |
                                (1u << ENTRY_FAMILY_CXX), ", ", buf, sizeof(buf));
    CHECK_STR_EQ(buf, "c, cxx, mimalloc");
    char small[6];
    entry_families_describe((1u << ENTRY_FAMILY_C) | (1u << ENTRY_FAMILY_JEMALLOC), ", ", small,
                            sizeof(small));
    CHECK(strlen(small) < sizeof(small));
    CHECK(strncmp(small, "c, je", 5) == 0);
    CHECK_STR_EQ(entry_family_name(ENTRY_FAMILY_COUNT), "?");
}

int main(void)
{
    RUN_TEST(the_c_entries_are_one_family);
    RUN_TEST(every_form_of_new_and_delete_is_cxx);
    RUN_TEST(the_allocators_own_apis_are_theirs);
    RUN_TEST(the_loaders_entries_and_names_of_no_entry_allocate_nothing);
    RUN_TEST(a_mask_is_written_in_family_order_and_cut_to_fit);
    return check_exit_code();
}
