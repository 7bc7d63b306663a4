/*
 * test_limits.c - the limits of bpf/hp_limits.h and the shifts and masks
 * derived from them. Most ties are _Static_asserts next to the constants;
 * the ones across folders live here, where both headers can be included:
 * the in-process sampler's table sizes (sampler/hp_sampler.h) against the
 * log2 values its index shifts use (hp_limits.h). And the share of a map
 * each process may hold.
 */
#include "check.h"

#include "heapprof.h"
#include "hp_limits.h"
#include "hp_sampler.h"

_Static_assert(HP_SAMPLER_SLOTS == 1u << HP_SAMPLER_SLOTS_LOG2,
               "the sampler's slot index shifts by 64 - HP_SAMPLER_SLOTS_LOG2");
_Static_assert(HP_FILTER_BUCKETS == 1u << HP_FILTER_BUCKETS_LOG2,
               "the sampler's filter index shifts by 64 - HP_FILTER_BUCKETS_LOG2");

/* The top bits of a 64-bit hash, as the sampler takes them, index inside
 * its tables for the largest hash. */
static void top_bits_of_a_hash_index_inside_the_tables(void)
{
    uint64_t h = ~0ULL;
    CHECK_U64_EQ(h >> (64 - HP_SAMPLER_SLOTS_LOG2), HP_SAMPLER_SLOTS - 1);
    CHECK_U64_EQ(h >> (64 - HP_FILTER_BUCKETS_LOG2), HP_FILTER_BUCKETS - 1);
}

/* An attach cookie gives back the slot and kind it was made of, at the
 * largest of each. */
static void cookies_give_back_slot_and_kind(void)
{
    uint64_t c = HP_COOKIE(HP_SPARE_SLOT, HP_KIND_COUNT - 1);
    CHECK_U64_EQ(HP_COOKIE_IMAGE(c), HP_SPARE_SLOT);
    CHECK_U64_EQ(HP_COOKIE_KIND(c), HP_KIND_COUNT - 1);
}

/* A process may hold an eighth of a map, and maps too small for an eighth
 * to reach HP_SHARE_FLOOR entries are not divided (0). */
static void each_process_gets_an_eighth_of_a_large_map(void)
{
    CHECK_INT_EQ(hp_process_share(HP_MAX_LIVE), HP_MAX_LIVE / 8);
    CHECK_INT_EQ(hp_process_share(HP_MAX_STACKS), 8192);
    CHECK_INT_EQ(hp_process_share(8 * HP_SHARE_FLOOR), HP_SHARE_FLOOR);
    CHECK_INT_EQ(hp_process_share(8 * HP_SHARE_FLOOR - 1), 0);
    CHECK_INT_EQ(hp_process_share(16), 0);
    CHECK_INT_EQ(hp_process_share(0), 0);
}

int main(void)
{
    RUN_TEST(top_bits_of_a_hash_index_inside_the_tables);
    RUN_TEST(cookies_give_back_slot_and_kind);
    RUN_TEST(each_process_gets_an_eighth_of_a_large_map);
    return check_exit_code();
}
