/* test.h — corvid's tiny C test harness. A test file defines functions with
 * TEST(name) and a main that calls RUN(name) for each, then returns
 * test_report(). Checks record a failure (file:line, expression, values)
 * and let the test continue, so one run shows every broken case.
 *
 * Every check must be able to fail. A case that cannot run here (no AVX2,
 * a missing file) says so with TEST_SKIP(why): it is reported "skip", never
 * "ok", and the binary then exits 77 (CTest's SKIP_RETURN_CODE) unless a
 * check failed. Data under ../shared/testdata is reached with
 * test_data("vocab/x.gguf"); when a whole binary cannot run (the folder is
 * absent) it calls test_skip(), which exits 77 at once and says why. In CI
 * (CI=true when CMake configures, as `make test` does) 77 is not a skip but
 * a failure (tests/CMakeLists.txt), so absent data can never pass.
 * JSON_INT / JSON_NUM read a member so that its absence fails: jansson reads
 * a missing value as 0, which a bound like ">= 0" would accept. */
#ifndef CV_TEST_H
#define CV_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int test_failures, test_checks, test_cases, test_skipped;
static const char *test_current;
static char test_skip_why[256]; /* set by TEST_SKIP for the running case */

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                         \
    do {                                                                                  \
        int before_ = test_failures;                                                      \
        test_current = #name;                                                             \
        test_cases++;                                                                     \
        test_skip_why[0] = 0;                                                             \
        test_##name();                                                                    \
        if (test_failures != before_)                                                     \
            printf("FAIL %s\n", #name);                                                   \
        else if (test_skip_why[0])                                                        \
            printf("skip %s: %s\n", #name, test_skip_why);                                \
        else                                                                              \
            printf("ok   %s\n", #name);                                                   \
        fflush(stdout);                                                                   \
    } while (0)

/* Ends the running case as skipped, with the reason printf-style. */
#define TEST_SKIP(...)                                                     \
    do {                                                                   \
        snprintf(test_skip_why, sizeof test_skip_why, __VA_ARGS__);        \
        test_skipped++;                                                    \
        return;                                                            \
    } while (0)

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        test_checks++;                                                                     \
        if (!(cond)) {                                                                     \
            test_failures++;                                                               \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, test_current, #cond); \
        }                                                                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                                         \
    do {                                                                             \
        test_checks++;                                                               \
        if (!(cond)) {                                                               \
            test_failures++;                                                         \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, test_current);        \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                    \
    do {                                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                                   \
        CHECK_MSG(a_ == b_, "%s == %s: %lld != %lld", #a, #b, a_, b_);                        \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                    \
    do {                                                                                      \
        const char *a_ = (a), *b_ = (b);                                                      \
        CHECK_MSG(a_ && b_ && !strcmp(a_, b_), "%s == %s: \"%s\" != \"%s\"", #a, #b,          \
                  a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                 \
    do {                                                                                      \
        double a_ = (double)(a), b_ = (double)(b);                                            \
        CHECK_MSG(fabs(a_ - b_) <= (tol), "%s ~ %s: %g vs %g (tol %g)", #a, #b, a_, b_, (double)(tol)); \
    } while (0)

static inline const char *test_data_dir(void)
{
#ifdef CV_TESTDATA_DIR
    const char *d = getenv("CV_TESTDATA_DIR");
    return d ? d : CV_TESTDATA_DIR;
#else
    const char *d = getenv("CV_TESTDATA_DIR");
    return d ? d : "../shared/testdata";
#endif
}

/* Returns a static path under the testdata folder (one at a time per call site
 * is enough for the tests; copy it if you need two). */
static inline const char *test_data(const char *rel)
{
    static char path[4][4096];
    static int k;
    k = (k + 1) & 3;
    snprintf(path[k], sizeof path[k], "%s/%s", test_data_dir(), rel);
    return path[k];
}

static inline void test_skip(const char *why)
{
    printf("SKIP: %s\n", why);
    exit(77);
}

/* Skips the whole test binary when ../shared/testdata is missing. */
static inline void test_require_data(void)
{
    struct stat st;
    if (stat(test_data_dir(), &st) != 0) {
        fprintf(stderr, "testdata folder %s is absent: these tests need ../shared/testdata beside the checkout\n",
                test_data_dir());
        test_skip("../shared/testdata is absent");
    }
}

#if __has_include(<jansson.h>)
#include <jansson.h>

static inline int64_t test_json_int(const char *file, int line, const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    test_checks++;
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    test_failures++;
    fprintf(stderr, "%s:%d: %s: '%s' is %s, not an integer\n", file, line, test_current, key,
            v ? "of another type" : "absent");
    return -1;
}

static inline double test_json_num(const char *file, int line, const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    test_checks++;
    if (json_is_number(v))
        return json_number_value(v);
    test_failures++;
    fprintf(stderr, "%s:%d: %s: '%s' is %s, not a number\n", file, line, test_current, key,
            v ? "of another type" : "absent");
    return NAN;
}

/* obj's member key as an integer / a number; absent or of another type is a
 * failed check (whatever the caller then compares) and reads as -1 / NaN. */
#define JSON_INT(obj, key) test_json_int(__FILE__, __LINE__, (obj), (key))
#define JSON_NUM(obj, key) test_json_num(__FILE__, __LINE__, (obj), (key))
#endif

/* The binary's exit status: 1 when a check failed or none ran, 77 when a
 * case was skipped (CTest shows the file skipped, and CI fails it), else 0. */
static inline int test_report(void)
{
    printf("%d cases, %d checks, %d failures, %d skipped\n", test_cases, test_checks, test_failures, test_skipped);
    if (test_failures)
        return 1;
    if (test_skipped) {
        printf("SKIP: %d of %d cases could not run here (see the skip lines above)\n", test_skipped, test_cases);
        return 77;
    }
    if (test_checks == 0) {
        fprintf(stderr, "no checks ran\n");
        return 1;
    }
    return 0;
}

#endif
