/* cmd_grammar.c — `corvid grammar`: compile a JSON Schema (or a tool list in
 * a model's tool-call syntax) the way the server will, report what is not
 * enforced, check a document against it, dump its automata, and measure
 * the per-token mask cost with a model's vocabulary (docs/PERF.md). The
 * benchmark walks random valid outputs (uniform over the allowed tokens, a
 * fixed seed) and times every mask: the first mask of a state fills its
 * cache, later ones reuse it, so cold and warm costs are reported apart. */
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "cli/cli.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench(cv_grammar *g, const cv_grammar_vocab *v, int n_gen, int max_tokens, uint64_t seed, bool json)
{
    int32_t n = cv_grammar_vocab_n(v);
    size_t words = ((size_t)n + 63) / 64;
    uint64_t *mask = cv_xcalloc(words, 8);
    double *t_warm = cv_xmalloc((size_t)n_gen * (size_t)max_tokens * sizeof *t_warm);
    size_t n_warm = 0, n_cold = 0, n_tok = 0;
    double cold_total = 0;
    cv_rng rng;
    cv_rng_seed(&rng, seed);
    cv_err err;
    for (int k = 0; k < n_gen; k++) {
        cv_grammar_state *s = NULL;
        if (cv_grammar_state_create(g, v, &s, &err)) {
            fprintf(stderr, "corvid grammar: %s\n", err.msg);
            return 1;
        }
        for (int step = 0; step < max_tokens && !cv_grammar_state_done(s); step++) {
            cv_grammar_info before, after;
            cv_grammar_get_info(g, &before);
            uint64_t t0 = cv_now_ns();
            cv_grammar_state_mask(s, mask, NULL);
            double us = (double)(cv_now_ns() - t0) / 1e3;
            int32_t left = max_tokens - step;
            bool near_end = left <= cv_grammar_state_min_bytes(s) + CV_GRAMMAR_BUDGET_WINDOW;
            cv_grammar_get_info(g, &after);
            if (after.n_cached > before.n_cached) {
                n_cold++;
                cold_total += us;
            } else {
                t_warm[n_warm++] = us;
            }
            int64_t n_allowed = 0;
            for (size_t w = 0; w < words; w++)
                n_allowed += __builtin_popcountll(mask[w]);
            if (n_allowed == 0)
                break;
            int64_t pick = (int64_t)cv_rng_below(&rng, (uint64_t)n_allowed);
            int32_t tok = -1;
            for (size_t w = 0; w < words && tok < 0; w++) {
                int c = __builtin_popcountll(mask[w]);
                if (pick >= c) {
                    pick -= c;
                    continue;
                }
                uint64_t bits = mask[w];
                while (pick--)
                    bits &= bits - 1;
                tok = (int32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
            }
            /* near the budget: draw again while over (not timed: it is the
             * sampler's loop, a few simulations per step) */
            while (near_end && tok >= 0 && cv_grammar_state_min_bytes_after(s, tok) > left - 1) {
                mask[tok >> 6] &= ~(1ull << (tok & 63));
                n_allowed--;
                if (n_allowed <= 0) {
                    tok = -1;
                    break;
                }
                int64_t p2 = (int64_t)cv_rng_below(&rng, (uint64_t)n_allowed);
                tok = -1;
                for (size_t w = 0; w < words && tok < 0; w++) {
                    int c = __builtin_popcountll(mask[w]);
                    if (p2 >= c) {
                        p2 -= c;
                        continue;
                    }
                    uint64_t bits = mask[w];
                    while (p2--)
                        bits &= bits - 1;
                    tok = (int32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
                }
            }
            if (tok < 0)
                break;
            if (cv_grammar_state_accept(s, tok, &err)) {
                fprintf(stderr, "corvid grammar: masked-in token refused: %s\n", err.msg);
                return 1;
            }
            n_tok++;
        }
        cv_grammar_state_destroy(s);
    }
    qsort(t_warm, n_warm, sizeof *t_warm, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n_warm; i++)
        sum += t_warm[i];
    double med = n_warm ? t_warm[n_warm / 2] : 0, p99 = n_warm ? t_warm[n_warm * 99 / 100] : 0;
    double mean_all = n_tok ? (sum + cold_total) / (double)(n_warm + n_cold) : 0;
    cv_grammar_info info;
    cv_grammar_get_info(g, &info);
    if (json)
        printf("{\"vocab\":%d,\"tokens\":%zu,\"warm_median_us\":%.2f,\"warm_mean_us\":%.2f,\"warm_p99_us\":%.2f,"
               "\"cold_masks\":%zu,\"cold_mean_us\":%.1f,\"mean_all_us\":%.2f,\"states\":%d,\"cached\":%d}\n",
               n, n_tok, med, n_warm ? sum / (double)n_warm : 0, p99, n_cold, n_cold ? cold_total / (double)n_cold : 0,
               mean_all, info.n_states, info.n_cached);
    else
        printf("vocab %d tokens, %zu generated tokens in %d outputs\n"
               "mask, cached states: median %.2f us, mean %.2f us, p99 %.2f us per token\n"
               "mask, first visit of a state (fills its cache): %zu masks, mean %.1f us\n"
               "mean over all masks: %.2f us per token (%d of %d states cached)\n",
               n, n_tok, n_gen, med, n_warm ? sum / (double)n_warm : 0, p99, n_cold,
               n_cold ? cold_total / (double)n_cold : 0, mean_all, info.n_cached, info.n_states);
    free(mask);
    free(t_warm);
    return 0;
}

int cv_cmd_grammar(int argc, char **argv)
{
    const cv_cmd *self = cv_cli_find("grammar");
    const char *schema_path = NULL, *vocab_path = NULL, *check_path = NULL, *tools_path = NULL, *syntax = NULL;
    const char *force = NULL;
    bool dump = false, json_out = false, parallel = false, lazy = false;
    int n_bench = 0, max_tokens = 512;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--vocab") && has) vocab_path = argv[++i];
        else if (!strcmp(a, "--check") && has) check_path = argv[++i];
        else if (!strcmp(a, "--tools") && has) tools_path = argv[++i];
        else if (!strcmp(a, "--syntax") && has) syntax = argv[++i];
        else if (!strcmp(a, "--force") && has) force = argv[++i];
        else if (!strcmp(a, "--bench") && has) n_bench = atoi(argv[++i]);
        else if (!strcmp(a, "--max-tokens") && has) max_tokens = atoi(argv[++i]);
        else if (!strcmp(a, "--seed") && has) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--dump")) dump = true;
        else if (!strcmp(a, "--json")) json_out = true;
        else if (!strcmp(a, "--parallel")) parallel = true;
        else if (!strcmp(a, "--lazy")) lazy = true;
        else if (a[0] != '-' && !schema_path) schema_path = a;
        else return cv_cli_usage_error(self, "unknown or incomplete argument '%s'", a);
    }
    if (!schema_path && !tools_path)
        return cv_cli_usage_error(self, "give a SCHEMA.json or --tools FILE --syntax NAME");
    if (n_bench < 0 || max_tokens <= 0 || max_tokens > 1000000)
        return cv_cli_usage_error(self, "--bench and --max-tokens must be positive");
    if (n_bench && !vocab_path)
        return cv_cli_usage_error(self, "--bench needs --vocab VOCAB.gguf");
    cv_err err;
    cv_buf text = { 0 }, warn = { 0 };
    cv_grammar *g = NULL;
    cv_tok *tok = NULL;
    cv_grammar_vocab *v = NULL;
    json_t *tools = NULL;
    int status = 1;
    uint64_t t0 = cv_now_ns();
    if (schema_path) {
        if (cv_read_file(schema_path, &text, 64u << 20, &err))
            goto fail;
        cv_grammar_opts o = { .warnings = &warn };
        if (cv_grammar_from_schema_text(text.data, text.len, &o, &g, &err))
            goto fail;
    } else {
        if (!syntax)
            return cv_cli_usage_error(self, "--tools needs --syntax NAME (a tool-call format: corvid parse-tools "
                                            "--format list)");
        const cv_tc_format *fmt = cv_tc_format_find(syntax);
        if (!fmt)
            return cv_cli_usage_error(self, "--syntax %s: not a tool-call format (corvid parse-tools --format list)",
                                      syntax);
        if (cv_read_file(tools_path, &text, 64u << 20, &err))
            goto fail;
        json_t *j = cv_json_parse(text.data, text.len, &err);
        if (!j)
            goto fail;
        /* a request body (with "tools") or a bare tools array */
        tools = json_is_array(j) ? json_incref(j) : json_incref(json_object_get(json_object_get(j, "body") ?
                                                                             json_object_get(j, "body") : j, "tools"));
        json_decref(j);
        cv_grammar_tools_opts o = { .syntax = cv_tc_format_syntax(fmt), .tools = tools, .force_name = force,
                                    .parallel = parallel, .lazy = lazy, .warnings = &warn };
        if (cv_grammar_from_tools(&o, &g, &err))
            goto fail;
    }
    double ms = (double)(cv_now_ns() - t0) / 1e6;
    cv_grammar_info info;
    cv_grammar_get_info(g, &info);
    if (warn.len)
        fprintf(stderr, "%s", warn.data);
    if (!json_out)
        printf("compiled in %.2f ms: %d rules, %d automaton states\n", ms, info.n_rules, info.n_states);
    if (dump) {
        cv_buf d = { 0 };
        cv_grammar_dump(g, &d);
        fwrite(d.data, 1, d.len, stdout);
        cv_buf_free(&d);
    }
    if (check_path) {
        cv_buf doc = { 0 };
        if (cv_read_file(check_path, &doc, 256u << 20, &err)) {
            cv_buf_free(&doc);
            goto fail;
        }
        cv_grammar_state *s = NULL;
        cv_grammar_state_create(g, NULL, &s, &err);
        int rc = cv_grammar_state_accept_bytes(s, doc.data, doc.len, &err);
        bool complete = rc == 0 && cv_grammar_state_can_end(s);
        if (rc)
            printf("%s: rejected: %s\n", check_path, err.msg);
        else
            printf("%s: %s\n", check_path, complete ? "valid" : "a valid prefix, incomplete");
        cv_grammar_state_destroy(s);
        cv_buf_free(&doc);
        if (!complete)
            goto out;
    }
    if (n_bench) {
        if (cv_tok_load_file(vocab_path, &tok, &err) || cv_grammar_vocab_from_tok(tok, &v, &err))
            goto fail;
        if (bench(g, v, n_bench, max_tokens, seed, json_out))
            goto out;
    }
    status = 0;
    goto out;
fail:
    fprintf(stderr, "corvid grammar: %s\n", err.msg);
out:
    cv_grammar_vocab_destroy(v);
    cv_tok_destroy(tok);
    cv_grammar_destroy(g);
    json_decref(tools);
    cv_buf_free(&text);
    cv_buf_free(&warn);
    return status;
}
