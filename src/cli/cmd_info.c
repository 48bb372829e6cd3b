/* cmd_info.c — `corvid info MODEL.gguf`: what a GGUF file holds — version,
 * metadata (long arrays and strings abbreviated) and tensors with their
 * types and shapes, then the model it is (dense or MoE, a hybrid's
 * recurrent layers, window layers, parameters, active parameters) and the
 * RAM serving it takes (cv_model_summarize: the loader's own reading of the
 * architecture and its layers, without preparing a weight). Also the
 * quickest check that a file is intact: it runs the full validation of the
 * reader. */
#include <stdio.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "model/model.h"

static void print_scalar(const cv_gguf_value *v)
{
    switch (v->type) {
    case CV_GGUF_UINT8: case CV_GGUF_UINT16: case CV_GGUF_UINT32: case CV_GGUF_UINT64:
        printf("%llu", (unsigned long long)v->u64);
        break;
    case CV_GGUF_INT8: case CV_GGUF_INT16: case CV_GGUF_INT32: case CV_GGUF_INT64:
        printf("%lld", (long long)v->i64);
        break;
    case CV_GGUF_FLOAT32: case CV_GGUF_FLOAT64: printf("%g", v->f64); break;
    case CV_GGUF_BOOL: printf("%s", v->b ? "true" : "false"); break;
    default: break;
    }
}

static void print_str(cv_str s, size_t max)
{
    cv_buf b = { 0 };
    cv_buf_put_json_str(&b, s.ptr, CV_MIN(s.len, max));
    printf("%s%s", b.data, s.len > max ? "…" : "");
    cv_buf_free(&b);
}

/* The model the file holds, in one line, and the memory serving it takes;
 * or why corvid cannot run it. A vocab-only GGUF has no model line. */
static void print_model(const cv_gguf *g)
{
    if (!cv_gguf_get(g, "general.architecture"))
        return;
    cv_model_summary s;
    cv_err err = { 0 };
    if (cv_model_summarize(g, &s, &err)) {
        printf("model: corvid cannot run this file: %s\n", err.msg);
        return;
    }
    cv_buf d = { 0 };
    cv_model_summary_describe(&s, &d);
    const int32_t n_ctx = CV_MIN(s.hp.n_ctx_train, 32768);
    printf("model: %s; RAM to serve it: %.1f GiB (%.1f GiB of tensors%s + an f16 KV cache of %d positions, %.1f "
           "KiB a position)\n", d.data, cv_model_summary_ram_bytes(&s, n_ctx, 1, 2) / 1073741824.0,
           s.bytes / 1073741824.0, s.hp.n_expert > 0 ? ", every expert resident" : "", n_ctx,
           (double)(s.kv_pos_elts[0] + s.kv_pos_elts[1]) * 2 / 1024);
    cv_buf_free(&d);
}

typedef struct info_opts {
    bool all;
} info_opts;

static const cv_flag flags[] = {
    CV_FLAG_ROW("--all", "-a", CV_FLAG_BOOL, offsetof(info_opts, all), 0, 0, NULL,
      "every value in full (long strings and arrays too)"),

};
static const cv_cli_spec spec = { .name = "info", .args = "MODEL.gguf", .min_args = 1, .max_args = 1, .flags = flags,
                                  .n_flags = CV_ARRAY_LEN(flags) };

int cv_cmd_info(int argc, char **argv)
{
    info_opts o = { 0 };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    bool all = o.all;
    cv_gguf *g;
    cv_err err = { 0 };
    char mp[PATH_MAX]; /* an alias or store name of a pulled model (cli/models.h) */
    if (cv_gguf_open(cv_model_local_or_self(argv[1], mp, sizeof mp), &g, &err) != 0) {
        fprintf(stderr, "corvid info: %s\n", err.msg);
        return 1;
    }
    size_t max = all ? SIZE_MAX : 120;
    printf("%s: GGUF v%u, %zu bytes, alignment %u, %lld keys, %lld tensors\n", cv_gguf_path(g), cv_gguf_version(g),
           cv_gguf_file_bytes(g), cv_gguf_alignment(g), (long long)cv_gguf_n_kv(g), (long long)cv_gguf_n_tensors(g));
    for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
        cv_str k = cv_gguf_kv_key(g, i);
        const cv_gguf_value *v = cv_gguf_kv_value(g, i);
        printf("  %.*s = ", (int)k.len, k.ptr);
        if (v->type == CV_GGUF_STRING) {
            print_str(v->str, max);
        } else if (v->type == CV_GGUF_ARRAY) {
            uint64_t show = all ? v->arr.n : CV_MIN(v->arr.n, (uint64_t)6);
            printf("[%s × %llu] ", cv_gguf_type_name(v->arr.type), (unsigned long long)v->arr.n);
            for (uint64_t j = 0; j < show; j++) {
                if (j) printf(", ");
                if (v->arr.type == CV_GGUF_STRING) {
                    print_str(v->arr.strs[j], 40);
                } else if (v->arr.type == CV_GGUF_FLOAT32 || v->arr.type == CV_GGUF_FLOAT64) {
                    printf("%g", cv_gguf_arr_float(v, j));
                } else {
                    printf("%lld", (long long)cv_gguf_arr_int(v, j));
                }
            }
            if (show < v->arr.n) printf(", …");
        } else {
            print_scalar(v);
        }
        printf("\n");
    }
    for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        cv_ggml_type_info ti;
        cv_ggml_type_info_get(t->type, &ti);
        printf("  tensor %-32s %-6s [", t->name, ti.name);
        for (uint32_t d = 0; d < t->n_dims; d++)
            printf("%s%lld", d ? ", " : "", (long long)t->ne[d]);
        printf("] %zu bytes\n", t->n_bytes);
    }
    print_model(g);
    cv_gguf_close(g);
    return 0;
}
