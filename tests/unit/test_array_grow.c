/*
 * test_array_grow.c - array_grow(): room for what is asked, capacities
 * doubled from the first size, and a request past size_t refused with the
 * array and its capacity left as they were.
 */
#include <stdint.h>
#include <stdlib.h>

#include "array_grow.h"
#include "check.h"

static void an_array_with_room_is_returned_as_it_is(void)
{
    size_t cap = 8;
    int *v = malloc(cap * sizeof(*v));
    CHECK(array_grow(v, &cap, 8, sizeof(*v), 4) == v);
    CHECK_INT_EQ(cap, 8);
    free(v);
}

static void appends_double_the_capacity_from_the_first_size(void)
{
    int *v = NULL;
    size_t cap = 0, n = 0;
    size_t caps_seen[4], ncaps = 0;
    for (int i = 0; i < 100; i++) {
        size_t before = cap;
        int *nv = array_grow(v, &cap, n + 1, sizeof(*v), 16);
        CHECK(nv != NULL);
        if (!nv)
            break;
        v = nv;
        if (cap != before && ncaps < 4)
            caps_seen[ncaps++] = cap;
        v[n++] = i;
    }
    CHECK_INT_EQ(ncaps, 4);
    CHECK_INT_EQ(caps_seen[0], 16);
    CHECK_INT_EQ(caps_seen[1], 32);
    CHECK_INT_EQ(caps_seen[2], 64);
    CHECK_INT_EQ(caps_seen[3], 128);
    for (int i = 0; i < 100; i++)
        CHECK_INT_EQ(v[i], i);
    free(v);
}

static void a_large_need_is_met_in_one_step(void)
{
    char *v = NULL;
    size_t cap = 0;
    v = array_grow(v, &cap, 5000, 1, 4096);
    CHECK(v != NULL);
    CHECK_INT_EQ(cap, 8192);
    free(v);
}

static void a_size_past_size_t_is_refused_and_nothing_changes(void)
{
    size_t cap = 4;
    uint64_t *v = malloc(cap * sizeof(*v));
    CHECK(array_grow(v, &cap, SIZE_MAX / 4, sizeof(*v), 4) == NULL);
    CHECK_INT_EQ(cap, 4);
    CHECK(array_grow(v, &cap, SIZE_MAX, 1, 4) == NULL);
    CHECK_INT_EQ(cap, 4);
    v[3] = 7; /* still ours */
    CHECK_INT_EQ(v[3], 7);
    free(v);
}

int main(void)
{
    RUN_TEST(an_array_with_room_is_returned_as_it_is);
    RUN_TEST(appends_double_the_capacity_from_the_first_size);
    RUN_TEST(a_large_need_is_met_in_one_step);
    RUN_TEST(a_size_past_size_t_is_refused_and_nothing_changes);
    return check_exit_code();
}
