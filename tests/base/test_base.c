/* test_base.c — the base layer: buffers, JSON string escaping, UTF-8 edge
 * cases, the streaming boundary helper, the RNG's determinism, the thread
 * pool and range splitting, and errors. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "test.h"

TEST(buf_appends_and_stays_nul_terminated)
{
    cv_buf b = { 0 };
    for (int i = 0; i < 1000; i++)
        cv_buf_printf(&b, "%d,", i);
    CHECK(b.data[b.len] == 0);
    CHECK(!strncmp(b.data, "0,1,2,", 6));
    cv_buf_consume(&b, 2);
    CHECK(!strncmp(b.data, "1,2,", 4));
    char *s = cv_buf_steal(&b);
    CHECK(b.len == 0 && b.data == NULL);
    free(s);
}

TEST(json_string_escapes_controls_and_replaces_bad_utf8)
{
    cv_buf b = { 0 };
    const char in[] = "a\"b\\c\n\x01\xC3\xA9\xFF";
    cv_buf_put_json_str(&b, in, sizeof in - 1);
    CHECK_EQ_STR(b.data, "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9\xEF\xBF\xBD\"");
    cv_buf_free(&b);
}

TEST(json_chars_escape_non_ascii_as_python_ensure_ascii_does_when_asked)
{
    cv_buf b = { 0 };
    const char in[] = "\x1f\t\xC3\xA9\xF0\x9F\x98\x80\xFF";
    cv_buf_put_json_chars(&b, in, sizeof in - 1, true); /* json.dumps(s, ensure_ascii=True) without the quotes */
    CHECK_EQ_STR(b.data, "\\u001f\\t\\u00e9\\ud83d\\ude00\\ufffd");
    cv_buf_reset(&b);
    cv_buf_put_json_chars(&b, in, sizeof in - 1, false);
    CHECK_EQ_STR(b.data, "\\u001f\\t\xC3\xA9\xF0\x9F\x98\x80\xEF\xBF\xBD");
    cv_buf_free(&b);
}

TEST(utf8_rejects_overlongs_surrogates_and_out_of_range)
{
    uint32_t cp;
    CHECK(cv_utf8_decode("\xC0\x80", 2, &cp) < 0);          /* overlong NUL */
    CHECK(cv_utf8_decode("\xE0\x80\x80", 3, &cp) < 0);      /* overlong */
    CHECK(cv_utf8_decode("\xED\xA0\x80", 3, &cp) < 0);      /* surrogate D800 */
    CHECK(cv_utf8_decode("\xF4\x90\x80\x80", 4, &cp) < 0);  /* > U+10FFFF */
    CHECK(cv_utf8_decode("\xF0\x9F\x98\x80", 4, &cp) == 4 && cp == 0x1F600);
    char out[4];
    CHECK(cv_utf8_encode(0x1F600, out) == 4 && !memcmp(out, "\xF0\x9F\x98\x80", 4));
    CHECK(cv_utf8_encode(0xD800, out) == 0);
    CHECK(cv_utf8_valid("h\xC3\xA9llo", 6));
    CHECK(!cv_utf8_valid("h\xC3", 2));
}

TEST(utf8_complete_prefix_holds_only_a_cut_sequence)
{
    CHECK(cv_utf8_complete_prefix("ab", 2) == 2);
    CHECK(cv_utf8_complete_prefix("a\xF0\x9F", 3) == 1);        /* emoji cut after 2 bytes */
    CHECK(cv_utf8_complete_prefix("a\xF0\x9F\x98\x80", 5) == 5);
    CHECK(cv_utf8_complete_prefix("a\xE2\x82", 3) == 1);        /* euro sign cut */
    CHECK(cv_utf8_complete_prefix("a\xFF", 2) == 2);            /* invalid: not held */
    CHECK(cv_utf8_complete_prefix("a\xE0\x80", 3) == 3);        /* can never be valid */
    CHECK(cv_utf8_complete_prefix("a\xE0", 2) == 1);
}

TEST(rng_is_deterministic_for_a_seed)
{
    cv_rng a, b;
    cv_rng_seed(&a, 42);
    cv_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        CHECK(cv_rng_u64(&a) == cv_rng_u64(&b));
    cv_rng_seed(&a, 43);
    CHECK(cv_rng_u64(&a) != cv_rng_u64(&b));
    double sum = 0, sq = 0;
    for (int i = 0; i < 20000; i++) {
        float x = cv_rng_normal(&a);
        sum += x;
        sq += x * x;
    }
    CHECK_NEAR(sum / 20000, 0.0, 0.05);
    CHECK_NEAR(sq / 20000, 1.0, 0.05);
}

static void add_share(void *ctx, int ith, int nth)
{
    _Atomic int64_t *total = ctx;
    int64_t lo, hi;
    cv_split_range(100003, ith, nth, 8, &lo, &hi);
    atomic_fetch_add(total, hi - lo);
}

TEST(pool_runs_every_share_exactly_once)
{
    cv_pool *p = cv_pool_create(4, NULL);
    CHECK(p != NULL);
    for (int r = 0; r < 2000; r++) {
        _Atomic int64_t total = 0;
        cv_pool_run(p, add_share, &total);
        CHECK_EQ_INT(total, 100003);
        if (total != 100003) break;
    }
    cv_pool_destroy(p);
}

/* Which thread computed each part of a run, and how often. */
typedef struct parts_seen {
    pthread_t on[4];
    _Atomic int32_t count[4];
} parts_seen;

static void note_part(void *ctx, int ith, int nth)
{
    parts_seen *s = ctx;
    (void)nth;
    s->on[ith] = pthread_self();
    atomic_fetch_add(&s->count[ith], 1);
}

/* A worker held in a signal handler stands for one the OS has not
 * scheduled: the handler runs on that thread until released. */
static _Atomic int hold_worker, worker_held;

static void hold_here(int sig)
{
    (void)sig;
    atomic_store(&worker_held, 1);
    const struct timespec nap = { 0, 100000 };
    while (atomic_load(&hold_worker))
        nanosleep(&nap, NULL);
}

typedef struct held_runs {
    cv_pool *p;
    int wrong; /* runs where a part ran twice, never, or on the held worker */
} held_runs;

static void *runs_while_held(void *arg)
{
    held_runs *h = arg;
    const pthread_t me = pthread_self();
    for (int r = 0; r < 100; r++) {
        parts_seen s = { 0 };
        cv_pool_run(h->p, note_part, &s);
        h->wrong += s.count[0] != 1 || s.count[1] != 1 || !pthread_equal(s.on[1], me);
    }
    return NULL;
}

/* A run never waits for a worker that has not started its part: the caller
 * computes that part itself, once, and the pool goes on using the worker
 * when it is back. Without it these runs would wait for the handler to end. */
/* Runs p until its worker, not the caller, computes part 1 (the caller
 * takes a part whose worker is slow to start, so on a busy machine that may
 * take many runs): false if it never did within 20 seconds. */
static bool run_until_the_worker_takes_part_1(cv_pool *p, parts_seen *s, int *wrong)
{
    const pthread_t me = pthread_self();
    const uint64_t until = cv_now_ns() + 20 * (uint64_t)1000000000;
    do {
        memset(s, 0, sizeof *s);
        cv_pool_run(p, note_part, s);
        *wrong += s->count[0] != 1 || s->count[1] != 1;
    } while (pthread_equal(s->on[1], me) && cv_now_ns() < until);
    return !pthread_equal(s->on[1], me);
}

TEST(pool_run_computes_the_parts_of_workers_that_have_not_started)
{
    cv_pool *p = cv_pool_create(2, NULL);
    CHECK(p != NULL);
    parts_seen s = { 0 };
    int wrong = 0;
    if (!run_until_the_worker_takes_part_1(p, &s, &wrong)) {
        /* holding "the worker" would then hold this thread for good */
        CHECK_MSG(false, "the pool's worker computed no part in 20 s of runs");
        cv_pool_destroy(p);
        return;
    }
    const pthread_t worker = s.on[1];
    struct sigaction sa = { .sa_handler = hold_here }, old;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, &old) == 0);
    atomic_store(&hold_worker, 1);
    CHECK(pthread_kill(worker, SIGUSR1) == 0);
    while (!atomic_load(&worker_held))
        sched_yield();
    /* The runs go on another thread, so that a pool that does wait fails
     * here in seconds (and then finishes once the worker is let go). */
    held_runs h = { .p = p };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, runs_while_held, &h) == 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    const int waited = pthread_timedjoin_np(t, NULL, &until);
    CHECK_EQ_INT(waited, 0);
    atomic_store(&hold_worker, 0);
    if (waited)
        pthread_join(t, NULL);
    CHECK_EQ_INT(h.wrong, 0);
    CHECK(run_until_the_worker_takes_part_1(p, &s, &wrong));
    CHECK_EQ_INT(wrong, 0);
    CHECK(pthread_equal(s.on[1], worker));
    cv_pool_destroy(p);
    sigaction(SIGUSR1, &old, NULL);
}

typedef struct items_seen {
    _Atomic int32_t count[257];
    _Atomic int32_t bad_ith;
    int nth;
} items_seen;

static void count_item(void *ctx, int64_t i, int ith)
{
    items_seen *s = ctx;
    atomic_fetch_add(&s->count[i], 1);
    if (ith < 0 || ith >= s->nth)
        atomic_fetch_add(&s->bad_ith, 1);
}

/* Every item once, on a thread index the run has, whatever the count
 * (none, one: on the caller, more than the threads) and after the pool
 * was narrowed to fewer threads. */
TEST(pool_run_items_takes_every_item_exactly_once)
{
    cv_pool *p = cv_pool_create(4, NULL);
    CHECK(p != NULL);
    static const int64_t counts[] = { 0, 1, 2, 3, 4, 5, 17, 257 };
    for (int narrow = 0; narrow < 2; narrow++) {
        cv_pool_set_threads(p, narrow ? 2 : 4);
        for (int r = 0; r < 200; r++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                static items_seen s;
                memset(&s, 0, sizeof s);
                s.nth = cv_pool_size(p);
                cv_pool_run_items(p, counts[c], count_item, &s);
                int wrong = s.bad_ith;
                for (int64_t i = 0; i < 257; i++)
                    wrong += s.count[i] != (i < counts[c]);
                CHECK_EQ_INT(wrong, 0);
                if (wrong)
                    goto out;
            }
    }
out:
    cv_pool_destroy(p);
}

/* Every page inside a committed block is resident when it returns (a
 * block of 8 MiB comes from a fresh mapping, none of it touched before). */
TEST(aligned_alloc_committed_commits_every_page)
{
    const size_t n = 8u << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    char *p = cv_aligned_alloc_committed(n);
    const uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    const size_t pages = (hi - lo) / page;
    unsigned char *in = cv_xmalloc(pages);
    CHECK(mincore((void *)lo, hi - lo, in) == 0);
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += in[i] & 1;
    CHECK_EQ_INT(resident, pages);
    free(in);
    cv_aligned_free(p);
}

/* cv_pages_commit makes resident exactly the pages its range touches, and
 * never writes outside the range, whose end pages hold other data. */
TEST(pages_commit_commits_the_pages_of_its_range_and_nothing_else)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 4 * page;
    const size_t from = page / 2, len = 2 * page; /* half a page in, to half a page into the third */
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    cv_pages_commit(m + from, len);
    unsigned char in[4];
    CHECK(mincore(m, n, in) == 0);
    CHECK((in[0] & 1) && (in[1] & 1) && (in[2] & 1));
    CHECK(!(in[3] & 1));
    memset(m, 0xAA, n);
    cv_pages_commit(m + from, len);
    size_t outside = 0;
    for (size_t i = 0; i < n; i++)
        outside += (i < from || i >= from + len) && m[i] != 0xAA;
    CHECK_EQ_INT(outside, 0);
    munmap(m, n);
}

TEST(split_range_covers_and_aligns)
{
    int64_t prev = 0;
    for (int i = 0; i < 3; i++) {
        int64_t lo, hi;
        cv_split_range(1000, i, 3, 32, &lo, &hi);
        CHECK(lo == prev);
        CHECK(lo % 32 == 0);
        prev = hi;
    }
    CHECK(prev == 1000);
}

TEST(err_prefix_keeps_the_original_message)
{
    cv_err e = { 0 };
    CHECK(CV_CORRUPT(&e, "tensor '%s' dim %d = %d, must be >= 0", "w", 1, -4) == CV_ECORRUPT);
    cv_err_prefix(&e, "loading %s: ", "m.gguf");
    CHECK_EQ_STR(e.msg, "loading m.gguf: tensor 'w' dim 1 = -4, must be >= 0");
    CHECK(e.line > 0);
}

TEST(json_parse_reports_position_and_rejects_nan)
{
    cv_err e = { 0 };
    json_t *v = cv_json_parse("{\"a\": NaN}", 10, &e);
    CHECK(v == NULL && e.code == CV_EINVAL && strstr(e.msg, "column"));
    cv_buf deep = { 0 };
    for (int i = 0; i < 200; i++) cv_buf_putc(&deep, '[');
    for (int i = 0; i < 200; i++) cv_buf_putc(&deep, ']');
    v = cv_json_parse(deep.data, deep.len, &e);
    CHECK(v == NULL && e.code == CV_ELIMIT);
    cv_buf_free(&deep);
    v = cv_json_parse("{\"n\": 5.0, \"s\": 1}", 18, &e);
    int64_t n = 0;
    const char *s = NULL;
    CHECK(cv_json_get_int(v, "n", "req", &n, &e) == 0 && n == 5);
    CHECK(cv_json_get_str(v, "s", "req", &s, &e) == CV_EINVAL);
    CHECK_EQ_STR(e.msg, "'req.s' must be a string, got an integer");
    json_decref(v);
}

int main(void)
{
    RUN(buf_appends_and_stays_nul_terminated);
    RUN(json_string_escapes_controls_and_replaces_bad_utf8);
    RUN(json_chars_escape_non_ascii_as_python_ensure_ascii_does_when_asked);
    RUN(utf8_rejects_overlongs_surrogates_and_out_of_range);
    RUN(utf8_complete_prefix_holds_only_a_cut_sequence);
    RUN(rng_is_deterministic_for_a_seed);
    RUN(pool_runs_every_share_exactly_once);
    RUN(pool_run_computes_the_parts_of_workers_that_have_not_started);
    RUN(pool_run_items_takes_every_item_exactly_once);
    RUN(aligned_alloc_committed_commits_every_page);
    RUN(pages_commit_commits_the_pages_of_its_range_and_nothing_else);
    RUN(split_range_covers_and_aligns);
    RUN(err_prefix_keeps_the_original_message);
    RUN(json_parse_reports_position_and_rejects_nan);
    return test_report();
}
