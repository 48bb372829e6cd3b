/* test_server_stop.c — the stop-string matcher: a stop string never reaches
 * the client, not even in part, wherever the piece boundaries fall; text
 * that only looked like a stop string is released; the earliest (then the
 * longest) match wins. Every case is fed whole and byte by byte, and at
 * every split point in between. */
#include "test.h"

#include "server/stop.h"

typedef struct stop_case {
    const char *name;
    const char *stops[4];
    const char *text;
    const char *want;  /* what the client sees */
    int want_hit;      /* index of the stop string, -1 for none, -2 for any */
} stop_case;

static const stop_case cases[] = {
    { "no stop strings pass text through", { NULL }, "hello world", "hello world", -1 },
    { "a stop string ends the text before it", { "STOP" }, "one two STOP three", "one two ", 0 },
    { "a stop string at the very start leaves nothing", { "##" }, "## heading", "", 0 },
    { "a near miss is released at the end", { "</end>" }, "a </en b </e", "a </en b </e", -1 },
    { "the earliest of several stop strings wins", { "world", "hello" }, "say hello world", "say ", 1 },
    { "when stop strings share a start the text is cut there", { "</", "</tool>" }, "x</tool>y", "x", -2 },
    { "multi-byte text around a stop string stays whole", { "\xe2\x86\x92" }, "caf\xc3\xa9 \xe2\x86\x92 done",
      "caf\xc3\xa9 ", 0 },
    { "a stop string split over many pieces is caught", { "\n\nUser:" }, "answer\n\nUser: more", "answer", 0 },
    { "overlapping prefixes are held then released", { "aab" }, "aaaaac", "aaaaac", -1 },
};

/* Feeds text in pieces of `step` bytes (0: whole) and returns what came out. */
static int run(const stop_case *c, size_t step, cv_buf *out)
{
    int n = 0;
    while (n < 4 && c->stops[n])
        n++;
    cv_stop s;
    cv_stop_init(&s, (char *const *)c->stops, n);
    size_t len = strlen(c->text), i = 0;
    int hit = -1;
    while (i < len && hit < 0) {
        size_t k = step ? CV_MIN(step, len - i) : len;
        hit = cv_stop_feed(&s, (cv_str){ c->text + i, k }, out);
        i += k;
    }
    if (hit < 0)
        cv_stop_flush(&s, out);
    cv_stop_fini(&s);
    return hit;
}

TEST(stop_strings_hold_back_and_cut_at_every_piece_size)
{
    for (size_t ci = 0; ci < CV_ARRAY_LEN(cases); ci++) {
        const stop_case *c = &cases[ci];
        for (size_t step = 0; step <= strlen(c->text); step++) {
            cv_buf out = { 0 };
            int hit = run(c, step, &out);
            CHECK_MSG(c->want_hit == -2 ? hit >= 0 : hit == c->want_hit, "%s (step %zu): hit %d, want %d", c->name, step, hit, c->want_hit);
            CHECK_MSG(out.len == strlen(c->want) && !memcmp(out.data ? out.data : "", c->want, out.len),
                      "%s (step %zu): got '%s', want '%s'", c->name, step, out.data ? out.data : "", c->want);
            cv_buf_free(&out);
        }
    }
}

TEST(nothing_of_a_possible_stop_string_is_released_early)
{
    const char *stops[] = { "<|im_end|>" };
    cv_stop s;
    cv_stop_init(&s, (char *const *)stops, 1);
    cv_buf out = { 0 };
    const char *pieces[] = { "ok <", "|im", "_en" };
    for (int i = 0; i < 3; i++)
        CHECK(cv_stop_feed(&s, cv_str_of(pieces[i]), &out) == -1);
    CHECK_EQ_STR(out.data, "ok ");
    CHECK(cv_stop_feed(&s, cv_str_of("d|>tail"), &out) == 0);
    CHECK_EQ_STR(out.data, "ok ");
    cv_buf_free(&out);
    cv_stop_fini(&s);
}

int main(void)
{
    RUN(stop_strings_hold_back_and_cut_at_every_piece_size);
    RUN(nothing_of_a_possible_stop_string_is_released_early);
    return test_report();
}
