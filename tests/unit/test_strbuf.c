/*
 * test_strbuf.c - the daemon's string builder (base/strbuf.c): text
 * appended and printf'd is kept whole and NUL-terminated as it grows past
 * any first size, and freeing leaves an empty builder to use again.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "strbuf.h"

static void appended_and_printed_text_reads_back_as_one_string(void)
{
    struct strbuf b = {0};
    CHECK_INT_EQ(strbuf_append(&b, "pid", 3), 0);
    CHECK_INT_EQ(strbuf_printf(&b, " %d of %s", 42, "redis"), 0);
    CHECK_INT_EQ(b.len, strlen("pid 42 of redis"));
    CHECK_STR_EQ(b.data, "pid 42 of redis");
    strbuf_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
}

static void text_far_past_the_first_size_is_kept_whole(void)
{
    struct strbuf b = {0};
    char want[20000];
    size_t at = 0;
    for (int i = 0; i < 2000; i++) {
        CHECK_INT_EQ(strbuf_printf(&b, "%04d;", i % 10000), 0);
        at += (size_t)snprintf(want + at, sizeof(want) - at, "%04d;", i % 10000);
    }
    CHECK_INT_EQ(b.len, at);
    CHECK(b.cap > b.len); /* room for the NUL */
    CHECK_STR_EQ(b.data, want);
    strbuf_free(&b);
}

static void an_empty_append_still_gives_a_string(void)
{
    struct strbuf b = {0};
    CHECK_INT_EQ(strbuf_append(&b, "", 0), 0);
    CHECK_STR_EQ(b.data, "");
    CHECK_INT_EQ(strbuf_printf(&b, "%s", ""), 0);
    CHECK_INT_EQ(b.len, 0);
    strbuf_free(&b);
}

int main(void)
{
    RUN_TEST(appended_and_printed_text_reads_back_as_one_string);
    RUN_TEST(text_far_past_the_first_size_is_kept_whole);
    RUN_TEST(an_empty_append_still_gives_a_string);
    return check_exit_code();
}
