/* test_engine_cli.c — `corvid synth`, `run` and `bench` as a user runs
 * them: the release binary (CV_RELEASE_BIN; `make test` builds it), its
 * exit codes, stdout and stderr. stories260K run greedy with --ids prints
 * exactly the documented ids; bench's JSON parses and its output hash is
 * the same on a second run; bad flags exit 2 with the usage. */
#include <sys/wait.h>

#include "ref_util.h"

static const char *bin = CV_RELEASE_BIN;

/* Runs a shell command line; captures stdout (and stderr when err != NULL). */
static int sh(const char *cmdline, cv_buf *out, cv_buf *err)
{
    char errpath[512] = "";
    cv_buf cmd = { 0 };
    if (err) {
        ref_tmp_path(errpath, sizeof errpath, "stderr");
        cv_buf_printf(&cmd, "%s 2>'%s'", cmdline, errpath);
    } else {
        cv_buf_printf(&cmd, "%s 2>/dev/null", cmdline);
    }
    FILE *f = popen(cmd.data, "r");
    cv_buf_free(&cmd);
    if (!f)
        return -1;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (out)
            cv_buf_append(out, chunk, n);
    int st = pclose(f);
    if (err) {
        cv_read_file(errpath, err, 1u << 20, NULL);
        unlink(errpath);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(run_with_ids_prints_the_documented_stories260k_continuation)
{
    char model[512], cmd[2048];
    ref_tmp_path(model, sizeof model, "cli-stories");
    snprintf(cmd, sizeof cmd, "'%s' import llama2c '%s' '%s' -o '%s'", bin, test_data("models/stories260K.bin"),
             test_data("models/tok512.bin"), model);
    CHECK_EQ_INT(sh(cmd, NULL, NULL), 0);
    cv_buf out = { 0 }, err = { 0 };
    snprintf(cmd, sizeof cmd, "'%s' run '%s' --ids -p 1 -n 256 --temp 0 --threads 2", bin, model);
    CHECK_EQ_INT(sh(cmd, &out, &err), 0);
    json_t *expect = ref_json(test_data("models/stories260K.greedy_t0.token_ids.json"));
    char *p = out.data;
    int same = 0;
    for (size_t i = 0; p && i < json_array_size(expect); i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v != json_integer_value(json_array_get(expect, i)))
            break;
        same++;
        p = end;
    }
    CHECK_MSG(same == 256, "corvid run printed %d of the 256 documented ids", same);
    CHECK(strstr(err.data ? err.data : "", "generated 256 tokens") != NULL);
    /* Text mode: an empty prompt is BOS alone; the continuation is the
     * documented text (run prints a final newline, as llama2.c's run did). */
    cv_buf_reset(&out);
    cv_buf_reset(&err);
    snprintf(cmd, sizeof cmd, "'%s' run '%s' -p '' -n 256 --temp 0 --threads 2", bin, model);
    CHECK_EQ_INT(sh(cmd, &out, &err), 0);
    cv_buf want = { 0 };
    CHECK(cv_read_file(test_data("models/stories260K.greedy_t0.expected.txt"), &want, 1 << 20, NULL) == 0);
    CHECK_MSG(out.len == want.len && memcmp(out.data, want.data, want.len) == 0, "corvid run text:\n%s\nexpected:\n%s",
              out.data ? out.data : "", want.data);
    cv_buf_free(&want);
    /* A prompt continues with its own leading space kept. */
    cv_buf_reset(&out);
    snprintf(cmd, sizeof cmd, "'%s' run '%s' -p 'Once upon a time' -n 8 --temp 0", bin, model);
    CHECK_EQ_INT(sh(cmd, &out, NULL), 0);
    CHECK_MSG(out.data && out.data[0] == ',', "continuation of 'Once upon a time': \"%s\"", out.data ? out.data : "");
    cv_buf_reset(&out);
    cv_buf_reset(&err);
    snprintf(cmd, sizeof cmd, "'%s' run '%s' --ids -p '1 999' -n 4", bin, model);
    CHECK_EQ_INT(sh(cmd, &out, &err), 2);
    CHECK(err.data && strstr(err.data, "0..511"));
    json_decref(expect);
    cv_buf_free(&out);
    cv_buf_free(&err);
    unlink(model);
}

TEST(synth_then_bench_reports_ceilings_and_a_stable_output_hash)
{
    char model[512], cmd[2048];
    ref_tmp_path(model, sizeof model, "cli-synth");
    snprintf(cmd, sizeof cmd, "'%s' synth --shape tiny --arch qwen2 --dtype q8_0 --seed 3 -o '%s'", bin, model);
    CHECK_EQ_INT(sh(cmd, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd, "'%s' info '%s'", bin, model);
    cv_buf out = { 0 };
    CHECK_EQ_INT(sh(cmd, &out, NULL), 0);
    CHECK(out.data && strstr(out.data, "blk.1.attn_k.bias"));
    char hash[2][17] = { "", "" };
    for (int r = 0; r < 2; r++) {
        cv_buf_reset(&out);
        snprintf(cmd, sizeof cmd, "'%s' bench '%s' -p 32 -n 8 --batch 1,3 --repeats 1 --no-probe --json --threads 2",
                 bin, model);
        CHECK_EQ_INT(sh(cmd, &out, NULL), 0);
        cv_err err = { 0 };
        json_t *j = out.data ? cv_json_parse(out.data, out.len, &err) : NULL;
        CHECK_MSG(j != NULL, "bench --json: %s", err.msg);
        if (!j)
            continue;
        CHECK(JSON_NUM(json_object_get(j, "prefill"), "tok_s") > 0);
        CHECK_EQ_INT(JSON_INT(json_object_get(j, "prefill"), "depth"), 0);
        json_t *dec = json_object_get(j, "decode");
        CHECK_EQ_INT(json_array_size(dec), 2);
        CHECK_EQ_INT(JSON_INT(json_array_get(dec, 1), "batch"), 3);
        /* every decode case: the step's time and its attention part; no
         * ceiling fractions when the probes were skipped */
        const json_t *d0 = json_array_get(dec, 0);
        CHECK(JSON_NUM(d0, "step_ms") > 0);
        CHECK(json_is_number(json_object_get(d0, "attention_ms")));
        CHECK(json_is_null(json_object_get(d0, "frac_bandwidth")));
        CHECK(json_is_null(json_object_get(json_object_get(j, "prefill"), "frac_int8_peak")));
        const char *h = json_string_value(json_object_get(json_array_get(dec, 0), "hash"));
        CHECK(h && strlen(h) == 16);
        if (h)
            snprintf(hash[r], sizeof hash[r], "%s", h);
        json_decref(j);
    }
    CHECK_MSG(strcmp(hash[0], hash[1]) == 0, "bench output hash changed between runs: %s vs %s", hash[0], hash[1]);
    /* --shared: three sequences forked from one 1,100-token context (its
     * blocks held by all three) generate what three separately filled
     * ones do */
    char line[2][128] = { "", "" };
    for (int r = 0; r < 2; r++) {
        cv_buf_reset(&out);
        snprintf(cmd, sizeof cmd, "'%s' bench '%s' -p 8 -n 6 --batch 3 --depth 1100 %s --repeats 1 --no-probe "
                 "--threads 2", bin, model, r ? "--shared" : "");
        CHECK_EQ_INT(sh(cmd, &out, NULL), 0);
        const char *h = out.data ? strstr(out.data, "hash ") : NULL;
        CHECK_MSG(h, "no hash in: %s", out.data ? out.data : "");
        if (h)
            snprintf(line[r], sizeof line[r], "%.21s", h);
        if (r)
            CHECK(out.data && strstr(out.data, "at depth 1100 (shared)"));
        /* the prefill comes after the depth too: an agent's turn */
        CHECK(out.data && strstr(out.data, "prefill    8 tokens at depth 1100:"));
        CHECK(out.data && strstr(out.data, "decode b=1 at depth 1100 against depth 0, 6 steps of each in turn:"));
    }
    CHECK_MSG(line[0][0] && !strcmp(line[0], line[1]), "--shared changed the ids: '%s' vs '%s'", line[0], line[1]);
    cv_buf_free(&out);
    unlink(model);
}

/* A hybrid end to end through the binary: synth's tiny qwen35, `info`
 * naming its recurrent layer and its state, and `bench --depth`, whose
 * prefill at depth goes back to the depth through a checkpoint (a hybrid's
 * state cannot be cut back otherwise). */
TEST(hybrid_synth_info_and_bench_at_depth)
{
    char model[512], cmd[2048];
    ref_tmp_path(model, sizeof model, "cli-hybrid");
    snprintf(cmd, sizeof cmd, "'%s' synth --shape tiny --arch qwen35 --dtype q8_0 --seed 3 -o '%s'", bin, model);
    CHECK_EQ_INT(sh(cmd, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd, "'%s' info '%s'", bin, model);
    cv_buf out = { 0 };
    CHECK_EQ_INT(sh(cmd, &out, NULL), 0);
    CHECK_MSG(out.data && strstr(out.data, "model: qwen35, dense") &&
                  strstr(out.data, "hybrid: 1 of 2 layers Gated DeltaNet (0)") &&
                  strstr(out.data, "(38.0 KiB of state a sequence)"),
              "%s", out.data ? out.data : "");
    cv_buf_reset(&out);
    snprintf(cmd, sizeof cmd, "'%s' bench '%s' -p 16 -n 4 --batch 1,2 --depth 40 --repeats 2 --no-probe --json "
             "--threads 2", bin, model);
    CHECK_EQ_INT(sh(cmd, &out, NULL), 0);
    cv_err err = { 0 };
    json_t *j = out.data ? cv_json_parse(out.data, out.len, &err) : NULL;
    CHECK_MSG(j != NULL, "bench --json: %s", err.msg);
    if (j) {
        CHECK(json_number_value(json_object_get(json_object_get(j, "prefill"), "tok_s")) > 0);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(j, "prefill"), "depth")), 40);
        CHECK_EQ_INT(json_array_size(json_object_get(j, "decode")), 2);
        /* the deep steps in turn with depth-0 ones: 4 of each a repeat */
        const json_t *alt = json_object_get(j, "alternated");
        CHECK_EQ_INT(json_integer_value(json_object_get(alt, "depth")), 40);
        CHECK_EQ_INT(json_integer_value(json_object_get(alt, "steps")), 8);
        CHECK_EQ_INT(json_array_size(json_object_get(alt, "step_ms")), 2);
        CHECK(json_number_value(json_object_get(alt, "ratio")) > 0);
        json_decref(j);
    }
    cv_buf_free(&out);
    unlink(model);
}

/* The issue-40 kinds through the binary: `info` and `doctor MODEL` say
 * what is new in each (the latent row and the KV bytes it makes a
 * position; per-layer heads, shared K/V, per-layer inputs, soft-capped
 * logits; YaRN and the query temperature; the grouped hybrid beside a
 * shared expert), in the same words. */
TEST(new_architectures_info_and_doctor_describe_them)
{
    static const struct { const char *shape, *arch, *says[3]; } kinds[] = {
        { "tiny", "deepseek2",
          { "multi-head latent attention: a 80-wide row a position (64 latent + 16 RoPE dims)", "sigmoid routing",
            "0.3 KiB a position" } }, /* 2 layers x 80 f16 values: no per-head K/V */
        { "tiny-gemma4", "gemma4",
          { "(heads of 32; the others' 64); 3 layers read earlier layers' K/V and keep none", "per-layer inputs of 32",
            "logits soft-capped at 30" } },
        { "tiny-gemma4moe", "gemma4", { "MoE: 8 experts, 2 used per token", "(heads of 32; the others' 64)", NULL } },
        { "tiny-mistral3", "mistral3", { "YaRN x16 from 64", "query temperature 0.1 per 64 positions", NULL } },
        { "tiny", "qwen3next",
          { "2 used per token beside a shared one", "hybrid: 1 of 2 layers Gated DeltaNet (0)", NULL } },
    };
    for (size_t k = 0; k < CV_ARRAY_LEN(kinds); k++) {
        char model[512], cmd[2048];
        ref_tmp_path(model, sizeof model, "cli-kind");
        snprintf(cmd, sizeof cmd, "'%s' synth --shape %s --arch %s --dtype q8_0 -o '%s'", bin, kinds[k].shape,
                 kinds[k].arch, model);
        CHECK_EQ_INT(sh(cmd, NULL, NULL), 0);
        cv_buf info = { 0 }, doc = { 0 };
        snprintf(cmd, sizeof cmd, "'%s' info '%s'", bin, model);
        CHECK_EQ_INT(sh(cmd, &info, NULL), 0);
        snprintf(cmd, sizeof cmd, "'%s' doctor --quick --threads 1 '%s'", bin, model);
        CHECK_EQ_INT(sh(cmd, &doc, NULL), 0);
        char head[64];
        snprintf(head, sizeof head, "model: %s, ", kinds[k].arch);
        CHECK_MSG(info.data && strstr(info.data, head), "%s: %s", kinds[k].shape, info.data ? info.data : "");
        for (int i = 0; i < 3 && kinds[k].says[i]; i++) {
            const char *want = kinds[k].says[i];
            CHECK_MSG(info.data && strstr(info.data, want), "%s %s: info lacks \"%s\"", kinds[k].arch,
                      kinds[k].shape, want);
            CHECK_MSG(doc.data && strstr(doc.data, want), "%s %s: doctor lacks \"%s\"", kinds[k].arch,
                      kinds[k].shape, want);
        }
        cv_buf_free(&info);
        cv_buf_free(&doc);
        unlink(model);
    }
}

TEST(bad_flags_exit_2_with_the_usage)
{
    static const char *const lines[] = {
        "synth --shape nope -o /tmp/corvid-x.gguf",
        "synth --shape tiny --dtype q3_k -o /tmp/corvid-x.gguf",
        "synth --shape tiny",
        "run",
        "run /nonexistent.gguf",
        "bench /nonexistent.gguf --batch 0",
        "bench /nonexistent.gguf -p x",
        "run /nonexistent.gguf -p 1 --temp -3",
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(lines); i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' %s", bin, lines[i]);
        cv_buf err = { 0 };
        int rc = sh(cmd, NULL, &err);
        CHECK_MSG(rc == 2 && err.data && (strstr(err.data, "usage:") || strstr(err.data, "not one of")),
                  "`corvid %s`: exit %d, stderr \"%s\"", lines[i], rc, err.data ? err.data : "");
        cv_buf_free(&err);
    }
    /* A missing model file is an error of the file (exit 1), named. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' run /nonexistent.gguf --ids -p 1", bin);
    cv_buf err = { 0 };
    CHECK_EQ_INT(sh(cmd, NULL, &err), 1);
    CHECK(err.data && strstr(err.data, "/nonexistent.gguf"));
    cv_buf_free(&err);
}

int main(void)
{
    test_require_data();
    if (access(bin, X_OK) != 0)
        test_skip("the release binary is not built (make release)");
    RUN(run_with_ids_prints_the_documented_stories260k_continuation);
    RUN(synth_then_bench_reports_ceilings_and_a_stable_output_hash);
    RUN(hybrid_synth_info_and_bench_at_depth);
    RUN(new_architectures_info_and_doctor_describe_them);
    RUN(bad_flags_exit_2_with_the_usage);
    return test_report();
}
