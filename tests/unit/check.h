/*
 * check.h - the few assertion macros the unit tests share.
 *
 * A failed check prints the expression, the values and the place, and the
 * test goes on, so one run shows every failure; main() returns
 * check_exit_code() so ctest sees the result.
 */
#ifndef HEAPPROF_CHECK_H
#define HEAPPROF_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                                         \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (va_ != vb_) {                                                                          \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b,  \
                    va_, vb_);                                                                     \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_U64_EQ(a, b)                                                                         \
    do {                                                                                           \
        uint64_t va_ = (uint64_t)(a), vb_ = (uint64_t)(b);                                         \
        if (va_ != vb_) {                                                                          \
            fprintf(stderr, "%s:%d: %s == %s failed: 0x%" PRIx64 " != 0x%" PRIx64 "\n", __FILE__,  \
                    __LINE__, #a, #b, va_, vb_);                                                   \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *va_ = (a), *vb_ = (b);                                                         \
        if (!va_ || !vb_ || strcmp(va_, vb_) != 0) {                                               \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a,  \
                    #b, va_ ? va_ : "(null)", vb_ ? vb_ : "(null)");                               \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

/* Runs one test function and says which one failed. */
#define RUN_TEST(fn)                                                                               \
    do {                                                                                           \
        int before_ = check_failures;                                                              \
        fn();                                                                                      \
        fprintf(stderr, "%s %s\n", check_failures == before_ ? "ok  " : "FAIL", #fn);              \
    } while (0)

/* RUN_TEST for a test function that takes one argument (a file, a case). */
#define RUN_TEST_WITH(fn, arg)                                                                     \
    do {                                                                                           \
        int before_ = check_failures;                                                              \
        fn(arg);                                                                                   \
        fprintf(stderr, "%s %s(%s)\n", check_failures == before_ ? "ok  " : "FAIL", #fn, #arg);    \
    } while (0)

static inline int check_exit_code(void)
{
    return check_failures ? 1 : 0;
}

#endif
