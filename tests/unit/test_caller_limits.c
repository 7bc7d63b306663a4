/*
 * test_caller_limits.c - requests in progress per untrusted uid
 * (http/caller_limits.c): a uid's fifth at once is refused, untrusted
 * callers together stop at what the reserve leaves, and a request that
 * ends frees its place. tests/integration/test_hostile.py checks that
 * /healthz and root's requests are answered beside one user's 64.
 */
#include "caller_limits.h"
#include "check.h"

#include <errno.h>
#include <string.h>

static void a_uid_has_at_most_its_share_in_progress(void)
{
    struct caller_limits l;
    char why[256];
    caller_limits_init(&l);
    for (int i = 0; i < CALLER_MAX_REQUESTS_PER_UID; i++)
        CHECK_INT_EQ(caller_limits_enter(&l, 1000, why, sizeof(why)), 0);
    CHECK_INT_EQ(caller_limits_enter(&l, 1000, why, sizeof(why)), -EUSERS);
    CHECK(strstr(why, "uid 1000 has 4 requests in progress") != NULL);
    CHECK_INT_EQ(caller_limits_enter(&l, 1001, why, sizeof(why)), 0); /* another's own share */
    caller_limits_leave(&l, 1000);
    CHECK_INT_EQ(caller_limits_enter(&l, 1000, why, sizeof(why)), 0);
    caller_limits_destroy(&l);
}

static void untrusted_callers_together_leave_the_reserve_free(void)
{
    struct caller_limits l;
    char why[256];
    int most = HTTP_MAX_CONNECTIONS - CALLER_RESERVED_REQUESTS, taken = 0;
    caller_limits_init(&l);
    for (uid_t uid = 2000; taken < most; uid++)
        for (int i = 0; i < CALLER_MAX_REQUESTS_PER_UID && taken < most; i++, taken++)
            CHECK_INT_EQ(caller_limits_enter(&l, uid, why, sizeof(why)), 0);
    CHECK_INT_EQ(caller_limits_enter(&l, 9999, why, sizeof(why)), -EAGAIN);
    caller_limits_leave(&l, 2000);
    CHECK_INT_EQ(caller_limits_enter(&l, 9999, why, sizeof(why)), 0);
    caller_limits_destroy(&l);
}

int main(void)
{
    RUN_TEST(a_uid_has_at_most_its_share_in_progress);
    RUN_TEST(untrusted_callers_together_leave_the_reserve_free);
    return check_exit_code();
}
