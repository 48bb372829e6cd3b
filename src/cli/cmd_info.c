/* cmd_info.c — `corvid info MODEL.gguf`: what a GGUF file holds — version,
 * metadata (long arrays and strings abbreviated) and tensors with their
 * types and shapes, then what corvid makes of it as a model (its
 * architecture's validation and layer kinds, e.g. a hybrid's recurrent
 * layers). Also the quickest check that a file is intact: it runs the full
 * validation of the reader and of the model loader, without preparing any
 * weight. */
#include <getopt.h>
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

int cv_cmd_info(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("info");
    bool all = false;
    static const struct option opts[] = { { "all", no_argument, 0, 'a' }, { 0, 0, 0, 0 } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "a", opts, NULL)) != -1) {
        if (c == 'a') all = true;
        else return cv_cli_usage_error(cmd, "unknown option");
    }
    if (argc - optind != 1)
        return cv_cli_usage_error(cmd, "needs one MODEL.gguf");
    cv_gguf *g;
    cv_err err = { 0 };
    char mp[PATH_MAX]; /* an alias or store name of a pulled model (cli/models.h) */
    if (cv_gguf_open(cv_model_local_or_self(argv[optind], mp, sizeof mp), &g, &err) != 0) {
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
    /* What corvid makes of it as a model (architecture, layer kinds: a
     * hybrid's recurrent layers), validated without preparing weights. */
    if (cv_gguf_get(g, "general.architecture")) {
        cv_model *m;
        const cv_model_params mp = { .inspect_only = true };
        if (cv_model_open_gguf(g, &mp, &m, &err) == 0) {
            cv_buf d = { 0 };
            cv_model_describe(m, &d);
            printf("  model: %s\n", d.data);
            cv_buf_free(&d);
            cv_model_close(m); /* closes g too */
            return 0;
        }
        printf("  model: corvid cannot run it: %s\n", err.msg);
    }
    cv_gguf_close(g);
    return 0;
}
