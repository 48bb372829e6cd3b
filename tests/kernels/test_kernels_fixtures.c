/* test_kernels_fixtures.c — the kernels against real GGUF files made by
 * llama-quantize: every quantized or F16 tensor of every reference model
 * (../shared/testdata/reference: dense llama/qwen files in the legacy and
 * K-quant types; reference2: MoE, hybrid and gemma files that add q2_K,
 * q3_K, iq4_nl, iq4_xs and mxfp4, 3-D expert tensors included; reference3:
 * gemma4's Q4_K_M with its per-layer embedding and rows of 16), dequantized
 * by each ISA, must hash (sha256 of the f32 little-endian values) to what
 * ggml's dequantizers give (<set>/dequant/MODEL.json), which pins block
 * layout, scale and min unpacking, nibble order and rounding bit for bit;
 * the matmul on those real tensors must equal the float product of their
 * dequantized values; and the dtype table's block geometry must equal the
 * GGUF format table. */
#include <dirent.h>
#include <stdlib.h>
#include <strings.h>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "test.h"

TEST(dtype_table_geometry_equals_the_gguf_format_table)
{
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt)
            continue;
        cv_ggml_type_info ti;
        CHECK_MSG(cv_ggml_type_info_get(t, &ti), "%s: not in the GGUF table", dt->name);
        CHECK_EQ_INT(dt->block_elems, ti.block_elems);
        CHECK_EQ_INT(dt->block_bytes, ti.block_bytes);
        CHECK_EQ_STR(dt->name, ti.name);
    }
}

/* Loads <set>/dequant/<model>.json and <set>/models/<model>.gguf for every
 * model of a fixture set ("reference", "reference2"); calls fn per tensor
 * the JSON lists. Skips the test binary (exit 77) when the set is absent. */
typedef void (*tensor_fn)(const char *model, const char *name, const cv_gguf_tensor *t, json_t *expect);

static int for_each_fixture_tensor(const char *set, tensor_fn fn)
{
    char dir[4096], rel[512];
    snprintf(rel, sizeof rel, "%s/dequant", set);
    snprintf(dir, sizeof dir, "%s", test_data(rel));
    DIR *d = opendir(dir);
    if (!d) {
        char why[600];
        snprintf(why, sizeof why, "%s is absent", rel);
        test_skip(why);
    }
    int n_tensors = 0;
    struct dirent *e;
    char **names = NULL;
    int n_names = 0;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".json")) {
            names = realloc(names, (n_names + 1) * sizeof *names);
            names[n_names++] = strdup(e->d_name);
        }
    closedir(d);
    for (int k = 0; k < n_names; k++) {
        char model[256];
        snprintf(model, sizeof model, "%.*s", (int)(strlen(names[k]) - 5), names[k]);
        snprintf(rel, sizeof rel, "%s/dequant/%s", set, names[k]);
        cv_buf b = { 0 };
        cv_err err = { 0 };
        CHECK_MSG(cv_read_file(test_data(rel), &b, 64u << 20, &err) == 0, "%s", err.msg);
        json_t *root = cv_json_parse(b.data, b.len, &err);
        CHECK_MSG(root != NULL, "%s: %s", rel, err.msg);
        snprintf(rel, sizeof rel, "%s/models/%s.gguf", set, model);
        cv_gguf *g = NULL;
        CHECK_MSG(cv_gguf_open(test_data(rel), &g, &err) == 0, "%s", err.msg);
        if (root && g) {
            const char *tname;
            json_t *ex;
            json_object_foreach(root, tname, ex) {
                const cv_gguf_tensor *t = cv_gguf_find_tensor(g, tname);
                CHECK_MSG(t != NULL, "%s: tensor %s missing", model, tname);
                if (t) {
                    fn(model, tname, t, ex);
                    n_tensors++;
                }
            }
        }
        cv_gguf_close(g);
        json_decref(root);
        cv_buf_free(&b);
        free(names[k]);
    }
    free(names);
    return n_tensors;
}

static void check_dequant(const char *model, const char *name, const cv_gguf_tensor *t, json_t *ex)
{
    const cv_dtype *dt = cv_dtype_get(t->type);
    CHECK_MSG(dt != NULL, "%s %s: type %u not in the table", model, name, t->type);
    if (!dt)
        return;
    const char *want_type = json_string_value(json_object_get(ex, "type"));
    CHECK_MSG(want_type && !strcasecmp(want_type, dt->name), "%s %s: file type %s, oracle type %s", model, name,
              dt->name, want_type ? want_type : "?");
    /* The whole tensor as one array of rows (expert tensors: ne[1] * ne[2]
     * rows of ne[0], experts one after another, as ggml lays them out). */
    const int64_t n = t->ne[0] * (int64_t)(t->n_bytes / cv_ggml_row_bytes(t->type, t->ne[0]));
    float *y = malloc((size_t)n * sizeof *y);
    const char *want = json_string_value(json_object_get(ex, "sha256_f32le"));
    const double want_sum = JSON_NUM(ex, "sum");
    const double want_abs = JSON_NUM(ex, "sum_abs");
    for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
        if (!cv_isa_supported(isa))
            continue;
        cv_dtype_ops_for(dt, isa).to_f32(t->data, y, n);
        char hex[65];
        cv_sha256 sh;
        cv_sha256_init(&sh);
        cv_sha256_update(&sh, y, (size_t)n * sizeof *y);
        cv_sha256_final(&sh, hex);
        double sum = 0, sum_abs = 0;
        for (int64_t i = 0; i < n; i++) {
            sum += y[i];
            sum_abs += fabs(y[i]);
        }
        CHECK_MSG(want && !strcmp(hex, want), "%s %s (%s, %s): sha256 %s, want %s (sum %.9g vs %.9g)", model, name,
                  dt->name, cv_isa_name(isa), hex, want ? want : "?", sum, want_sum);
        CHECK_NEAR(sum_abs, want_abs, 1e-6 * want_abs);
    }
    free(y);
}

TEST(every_reference_tensor_dequantizes_to_ggmls_exact_values)
{
    test_require_data();
    int n = for_each_fixture_tensor("reference", check_dequant);
    /* 9 llama files x 16 + 4 qwen files x 15 tensors. */
    CHECK_EQ_INT(n, 204);
}

TEST(every_reference2_tensor_dequantizes_to_ggmls_exact_values)
{
    test_require_data();
    int n = for_each_fixture_tensor("reference2", check_dequant);
    /* the 11 quantized files' non-F32 tensors: 6 qwen3moe x 15 (IQ4_XS,
     * Q2_K, Q3_K_M, Q4_K_M, Q8_0), gpt-oss MXFP4 16, qwen35 2 x 32,
     * qwen35moe 22, gemma3 2 x 43 */
    CHECK_EQ_INT(n, 263);
}

TEST(every_reference3_tensor_dequantizes_to_ggmls_exact_values)
{
    test_require_data();
    int n = for_each_fixture_tensor("reference3", check_dequant);
    /* gemma4 Q4_K_M's non-F32 tensors: 28 Q4_K, 10 Q5_0, 6 F16, 3 Q8_0 (the
     * per-layer embedding among them), 2 Q6_K */
    CHECK_EQ_INT(n, 49);
}

/* One matmul per tensor type on a real tensor (an expert tensor's first
 * expert when the type has no 2-D tensor: iq4_nl and mxfp4 carry only
 * experts in these files): X of 1 token (decode), 5 (a small batch) and 16
 * (a prefill tile), threaded. */
static cv_pool *fixture_pool;
static bool seen_type[CV_GGML_TYPE_COUNT];
static bool experts_pass; /* the second pass: 3-D tensors of types no 2-D tensor covered */

static void check_matmul(const char *model, const char *name, const cv_gguf_tensor *t, json_t *ex)
{
    (void)ex;
    if (seen_type[t->type] || t->n_dims != (experts_pass ? 3u : 2u))
        return;
    const cv_dtype *dt = cv_dtype_get(t->type);
    const int64_t n_in = t->ne[0], n_out = t->ne[1];
    const size_t n_bytes = cv_ggml_row_bytes(t->type, n_in) * (size_t)n_out;
    seen_type[t->type] = true;
    float *wf = malloc((size_t)(n_in * n_out) * sizeof *wf);
    CHECK_EQ_INT(cv_dequantize_row(t->type, t->data, wf, n_in * n_out, NULL), 0);
    const int64_t toks[] = { 1, 5, 16 };
    for (size_t k = 0; k < CV_ARRAY_LEN(toks); k++) {
        const int64_t n_tok = toks[k];
        float *x = malloc((size_t)(n_in * n_tok) * sizeof *x), *y = malloc((size_t)(n_out * n_tok) * sizeof *y);
        cv_rng r;
        cv_rng_seed(&r, 42 + k);
        for (int64_t i = 0; i < n_in * n_tok; i++)
            x[i] = cv_rng_normal(&r);
        for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
            if (!cv_isa_supported(isa))
                continue;
            cv_wmat *w;
            cv_err err = { 0 };
            CHECK_MSG(cv_wmat_create_isa(t->type, n_in, n_out, t->data, n_bytes, isa, &w, &err) == 0, "%s", err.msg);
            cv_matmul(fixture_pool, w, n_tok, x, y);
            int bad = 0;
            for (int64_t tk = 0; tk < n_tok; tk++)
                for (int64_t o = 0; o < n_out; o++) {
                    double s = 0, m = 0;
                    for (int64_t i = 0; i < n_in; i++) {
                        s += (double)wf[o * n_in + i] * x[tk * n_in + i];
                        m += fabs((double)wf[o * n_in + i] * x[tk * n_in + i]);
                    }
                    /* 8-bit activations on Gaussian X: well under 1% of the
                     * magnitude sum; f16/f32 weights: f32 rounding. */
                    double tol = dt->is_quantized ? 0.01 * m : 1e-5 * m;
                    if (!(fabs(y[tk * n_out + o] - s) <= tol) && bad++ < 3)
                        CHECK_MSG(false, "%s %s (%s, %s, %lld tokens): y[%lld][%lld] = %g, want %g", model, name,
                                  dt->name, cv_isa_name(isa), (long long)n_tok, (long long)tk, (long long)o,
                                  y[tk * n_out + o], s);
                }
            CHECK(bad == 0);
            cv_wmat_destroy(w);
        }
        free(x);
        free(y);
    }
    free(wf);
}
TEST(matmul_on_every_reference_weight_type_equals_its_dequantized_product)
{
    test_require_data();
    fixture_pool = cv_pool_create(2, NULL);
    for_each_fixture_tensor("reference", check_matmul);
    for_each_fixture_tensor("reference2", check_matmul);
    experts_pass = true;
    for_each_fixture_tensor("reference2", check_matmul);
    int types = 0;
    for (int t = 0; t < CV_GGML_TYPE_COUNT; t++)
        types += seen_type[t];
    /* f16 q4_0 q4_1 q5_0 q5_1 q8_0 q4_K q5_K q6_K; q2_K q3_K iq4_xs (2-D
     * attn_q); iq4_nl mxfp4 (experts only) */
    CHECK_EQ_INT(types, 14);
    CHECK(seen_type[CV_GGML_IQ4_NL] && seen_type[CV_GGML_MXFP4] && seen_type[CV_GGML_Q2_K]);
    cv_pool_destroy(fixture_pool);
}

int main(void)
{
    RUN(dtype_table_geometry_equals_the_gguf_format_table);
    RUN(every_reference_tensor_dequantizes_to_ggmls_exact_values);
    RUN(every_reference2_tensor_dequantizes_to_ggmls_exact_values);
    RUN(every_reference3_tensor_dequantizes_to_ggmls_exact_values);
    RUN(matmul_on_every_reference_weight_type_equals_its_dequantized_product);
    return test_report();
}
