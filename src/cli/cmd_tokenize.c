/* cmd_tokenize.c — `corvid tokenize` and `corvid detokenize`: the tokenizer
 * layer from the shell, for debugging a prompt and for the speed benchmark
 * (`corvid tokenize --bench MODEL [FILE]`), which times encoding of 1 KB,
 * 100 KB and 10 MB of mixed source code on one thread and prints MB/s plus a
 * hash of the ids so a faster build that changes output shows. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "tokenizer/tokenizer.h"

/* ---- bench text: deterministic mixed source code ---- */

static const char *const idents[] = {
    "buffer", "count", "index", "value", "result", "request", "handler", "config", "token", "offset",
    "length", "parser", "stream", "client", "server", "message", "context", "options", "items", "node",
    "cache", "prefix", "callback", "payload", "schema", "field", "header", "status", "worker", "queue",
};
static const char *const snippets[] = {
    "static int %s_%s(const char *%s, size_t %s)\n{\n    if (!%s)\n        return -1;\n    for (size_t i = 0; i < %s; i++)\n        total += %s[i] * %d;\n    return 0;\n}\n\n",
    "def %s_%s(self, %s, %s=None):\n    \"\"\"Return the %s for %s.\"\"\"\n    if %s is None:\n        raise ValueError(f\"missing {%s!r}\")\n    return [x * %d for x in %s]\n\n",
    "export async function %s%s(%s, %s) {\n  const %s = await fetch(`/api/${%s}`);\n  if (!%s.ok) throw new Error(\"status \" + %s.status);\n  return %s.json().then((d) => d.items.slice(0, %d));\n}\n\n",
    "{\"%s\": \"%s\", \"%s\": [%d, %d, 3.25], \"%s\": {\"%s\": true, \"%s\": null, \"%s\": \"%s\"}}\n",
    "--- a/src/%s.c\n+++ b/src/%s.c\n@@ -%d,7 +%d,8 @@\n-    %s = %s + 1;\n+    %s = %s + %d;\n+    assert(%s >= 0);\n",
    "fn %s_%s(%s: &[u8], %s: usize) -> Result<Vec<u32>, Error> {\n    let mut out = Vec::with_capacity(%s);\n    for (i, b) in %s.iter().enumerate() { out.push(*b as u32 + %d); }\n    Ok(out)\n}\n\n",
    "$ cargo build --release\n   Compiling %s v0.%d.0\n    Finished release [optimized] target(s) in %d.42s\n$ ./target/release/%s --%s %s\n",
    "func (s *%s) %s(%s int, %s string) error {\n\tif %s < 0 {\n\t\treturn fmt.Errorf(\"bad %%d\", %s)\n\t}\n\ts.%s = append(s.%s, %d)\n\treturn nil\n}\n\n",
};

static void bench_text(cv_buf *b, size_t bytes, uint64_t seed)
{
    cv_rng r;
    cv_rng_seed(&r, seed);
    char chunk[1024];
    while (b->len < bytes) {
        const char *fmt = snippets[cv_rng_below(&r, CV_ARRAY_LEN(snippets))];
        const char *a[12];
        for (int i = 0; i < 12; i++)
            a[i] = idents[cv_rng_below(&r, CV_ARRAY_LEN(idents))];
        int num = (int)cv_rng_below(&r, 100000);
        /* Every snippet takes strings and ints in a fixed order; pass the
         * same argument list and let unused ones be ignored. */
        int n = 0;
        const char *p = fmt;
        char *o = chunk;
        size_t room = sizeof chunk;
        int si = 0;
        while (*p && room > 16) {
            if (p[0] == '%' && p[1] == 's') {
                int w = snprintf(o, room, "%s", a[si++ % 12]);
                o += w, room -= (size_t)w, p += 2;
            } else if (p[0] == '%' && p[1] == 'd') {
                int w = snprintf(o, room, "%d", num + n++);
                o += w, room -= (size_t)w, p += 2;
            } else if (p[0] == '%' && p[1] == '%') {
                *o++ = '%', room--, p += 2;
            } else {
                *o++ = *p++, room--;
            }
        }
        cv_buf_append(b, chunk, (size_t)(o - chunk));
    }
    b->len = bytes;
    /* don't cut a character: the text is ASCII */
    b->data[b->len] = 0;
}

static uint64_t fnv(const int32_t *ids, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint32_t)ids[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int bench(const cv_tok *t, const char *model, const char *file)
{
    cv_buf src = { 0 };
    cv_err err = { 0 };
    if (file && cv_read_file(file, &src, CV_MAX_TOK_INPUT, &err) != 0) {
        fprintf(stderr, "corvid tokenize: %s\n", err.msg);
        return 1;
    }
    static const size_t sizes[] = { 1000, 100000, 10000000 };
    printf("# corvid tokenize --bench: vocab %s (pre %s, %d tokens), one thread, %s\n", model, cv_tok_pre_name(t),
           cv_tok_n_vocab(t), file ? file : "generated mixed source code (C, Python, JS, JSON, diff, Rust, shell, Go)");
    for (size_t k = 0; k < CV_ARRAY_LEN(sizes); k++) {
        cv_buf text = { 0 };
        if (file) {
            while (text.len < sizes[k])
                cv_buf_append(&text, src.data, CV_MIN(src.len, sizes[k] - text.len));
        } else {
            bench_text(&text, sizes[k], 42 + k);
        }
        /* Repeat small inputs so each case runs ~0.5 s or more; report the
         * median of 5 timed runs. */
        int reps = sizes[k] < 50000 ? 2000 : sizes[k] < 5000000 ? 40 : 1;
        double runs[5];
        size_t n_ids = 0;
        uint64_t h = 0;
        for (int r = 0; r < 5; r++) {
            double t0 = cv_now_s();
            for (int i = 0; i < reps; i++) {
                cv_tok_ids ids = { 0 };
                cv_tok_encode(t, text.data, text.len, 0, &ids, NULL);
                n_ids = ids.n;
                h = fnv(ids.ids, ids.n);
                cv_tok_ids_free(&ids);
            }
            runs[r] = (cv_now_s() - t0) / reps;
        }
        for (int i = 0; i < 5; i++)
            for (int j = i + 1; j < 5; j++)
                if (runs[j] < runs[i]) {
                    double x = runs[i];
                    runs[i] = runs[j];
                    runs[j] = x;
                }
        double med = runs[2];
        printf("%zu. %9zu bytes  %8zu tokens  %7.2f MB/s  %6.3f ms  (%.2f bytes/token)  ids %016llx\n", k + 1,
               text.len, n_ids, (double)text.len / med / 1e6, med * 1e3, (double)text.len / (double)(n_ids ? n_ids : 1),
               (unsigned long long)h);
        cv_buf_free(&text);
    }
    cv_buf_free(&src);
    return 0;
}

/* ---- commands ---- */

static void print_piece(const cv_tok *t, int32_t id)
{
    cv_buf p = { 0 };
    cv_tok_piece(t, id, 0, &p, NULL);
    cv_buf out = { 0 };
    cv_buf_put_json_str(&out, p.data ? p.data : "", p.len);
    printf("%d\t%s\n", id, out.data);
    cv_buf_free(&p);
    cv_buf_free(&out);
}

/* ---- the commands ---- */

typedef struct tok_opts {
    int pieces; /* 0: ids, 1: one id and piece per line */
    bool no_bos, special, bench, count, skip_special;
} tok_opts;

static const cv_flag tok_flags[] = {
    CV_FLAG_ROW("--ids", NULL, CV_FLAG_SET, offsetof(tok_opts, pieces), 0, 0, NULL,
      "print the ids on one line (the default)"),
    CV_FLAG_ROW("--pieces", NULL, CV_FLAG_SET, offsetof(tok_opts, pieces), 1, 0, NULL,
      "print one id and its piece per line"),
    CV_FLAG_ROW("--count", NULL, CV_FLAG_BOOL, offsetof(tok_opts, count), 0, 0, NULL, "print only how many tokens"),
    CV_FLAG_ROW("--no-bos", NULL, CV_FLAG_BOOL, offsetof(tok_opts, no_bos), 0, 0, NULL,
      "no BOS (or EOS) even where the vocabulary adds them"),
    CV_FLAG_ROW("--special", NULL, CV_FLAG_BOOL, offsetof(tok_opts, special), 0, 0, NULL,
      "control tokens written in the text are those tokens (CV_TOK_PARSE_SPECIAL)"),
    CV_FLAG_ROW("--bench", NULL, CV_FLAG_BOOL, offsetof(tok_opts, bench), 0, 0, NULL,
      "time encoding 1 KB, 100 KB and 10 MB of source code (or FILE): MB/s and a hash of the ids"),

};
static const cv_cli_spec tok_spec = { .name = "tokenize", .args = "MODEL (TEXT | -)", .max_args = 2, .flags = tok_flags,
                                      .n_flags = CV_ARRAY_LEN(tok_flags),
                                      .notes = "With --bench: corvid tokenize --bench MODEL [FILE]." };

static const cv_flag detok_flags[] = {
    CV_FLAG_ROW("--skip-special", NULL, CV_FLAG_BOOL, offsetof(tok_opts, skip_special), 0, 0, NULL,
      "leave control tokens out of the text"),

};
static const cv_cli_spec detok_spec = { .name = "detokenize", .args = "MODEL ID...", .min_args = 1, .max_args = -1,
                                        .flags = detok_flags,
                                        .n_flags = CV_ARRAY_LEN(detok_flags) };

int cv_cmd_tokenize(int argc, char **argv)
{
    tok_opts o = { 0 };
    int rest, st;
    if (!cv_cli_parse(&tok_spec, &o, argc, argv, &rest, &st))
        return st;
    char **pos = argv + 1;
    bool pieces = o.pieces, no_bos = o.no_bos, special = o.special, do_bench = o.bench, count = o.count;
    if (rest < 1 || (!do_bench && rest != 2))
        return cv_cli_usage_error(&tok_spec, do_bench ? "--bench needs MODEL [FILE]" : "needs MODEL and TEXT (or - for stdin)");
    cv_err err = { 0 };
    cv_tok *t = NULL;
    char mp[PATH_MAX]; /* an alias or store name of a pulled model (cli/models.h) */
    if (cv_tok_load_file(cv_model_local_or_self(pos[0], mp, sizeof mp), &t, &err) != 0) {
        fprintf(stderr, "corvid tokenize: %s\n", err.msg);
        return 1;
    }
    int status = 0;
    if (do_bench) {
        status = bench(t, pos[0], rest == 2 ? pos[1] : NULL);
        cv_tok_destroy(t);
        return status;
    }
    cv_buf text = { 0 };
    const char *arg = pos[1];
    if (!strcmp(arg, "-")) {
        if (cv_read_file("/dev/stdin", &text, CV_MAX_TOK_INPUT, &err) != 0) {
            fprintf(stderr, "corvid tokenize: %s\n", err.msg);
            cv_tok_destroy(t);
            return 1;
        }
    } else {
        cv_buf_puts(&text, arg);
    }
    unsigned flags = (no_bos ? 0 : CV_TOK_ADD_SPECIAL) | (special ? CV_TOK_PARSE_SPECIAL : 0);
    cv_tok_ids ids = { 0 };
    if (cv_tok_encode(t, text.data ? text.data : "", text.len, flags, &ids, &err) != 0) {
        fprintf(stderr, "corvid tokenize: %s\n", err.msg);
        status = 1;
    } else if (count) {
        printf("%zu\n", ids.n);
    } else if (pieces) {
        for (size_t i = 0; i < ids.n; i++)
            print_piece(t, ids.ids[i]);
    } else {
        for (size_t i = 0; i < ids.n; i++)
            printf("%s%d", i ? " " : "", ids.ids[i]);
        printf("\n");
    }
    cv_tok_ids_free(&ids);
    cv_buf_free(&text);
    cv_tok_destroy(t);
    return status;
}

int cv_cmd_detokenize(int argc, char **argv)
{
    tok_opts o = { 0 };
    int n_pos, st;
    if (!cv_cli_parse(&detok_spec, &o, argc, argv, &n_pos, &st))
        return st;
    char **pos = argv + 1;
    bool skip = o.skip_special;
    cv_err err = { 0 };
    cv_tok *t = NULL;
    char mp[PATH_MAX];
    if (cv_tok_load_file(cv_model_local_or_self(pos[0], mp, sizeof mp), &t, &err) != 0) {
        fprintf(stderr, "corvid detokenize: %s\n", err.msg);
        return 1;
    }
    cv_tok_ids ids = { 0 };
    int status = 0;
    for (int i = 1; i < n_pos && status == 0; i++) {
        /* ids may come as separate arguments or one space/comma list */
        for (const char *p = pos[i]; *p;) {
            while (*p == ' ' || *p == ',' || *p == '\n' || *p == '[' || *p == ']')
                p++;
            if (!*p)
                break;
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v >= cv_tok_n_vocab(t)) {
                fprintf(stderr, "corvid detokenize: '%s' is not a token id in [0, %d)\n", p, cv_tok_n_vocab(t));
                status = 2;
                break;
            }
            if (ids.n == ids.cap) {
                ids.cap = ids.cap ? ids.cap * 2 : 64;
                ids.ids = cv_xrealloc(ids.ids, ids.cap * sizeof(int32_t));
            }
            ids.ids[ids.n++] = (int32_t)v;
            p = end;
        }
    }
    if (status == 0) {
        cv_buf out = { 0 };
        cv_tok_decode(t, ids.ids, ids.n, CV_TOK_AT_START | (skip ? CV_TOK_SKIP_SPECIAL : 0), &out, NULL);
        fwrite(out.data ? out.data : "", 1, out.len, stdout);
        printf("\n");
        cv_buf_free(&out);
    }
    cv_tok_ids_free(&ids);
    cv_tok_destroy(t);
    return status;
}
