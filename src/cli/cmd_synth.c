/* cmd_synth.c — `corvid synth`: writes a random-weight model with a real
 * architecture's shape and a llama-quantize-like type mix (model/synth.c),
 * for tests and benchmarks. Deterministic for a seed at any thread count;
 * --vocab copies a vocab-only GGUF's tokenizer (and chat template) in. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "model/synth.h"

typedef struct synth_opts {
    cv_synth_params p;
    const char *out;
    int32_t threads;
    bool list;
} synth_opts;

#define P(field) offsetof(synth_opts, p.field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--arch", NULL, CV_FLAG_STR, P(arch), 0, 0, "ARCH", "architecture (default: the shape's own)"),
    CV_FLAG_ROW("--shape", NULL, CV_FLAG_STR, P(shape), 0, 0, "SHAPE", "a real model's dimensions (required)"),
    CV_FLAG_ROW("--dtype", NULL, CV_FLAG_STR, P(dtype), 0, 0,
      "f32|f16|q8_0|q4_0|q4_k_m|q5_k_m|q6_k|iq4_xs|mxfp4|q2_k|q3_k_m",
      "weight type mix, as llama-quantize's (default f16)"),
    CV_FLAG_ROW("--vocab", NULL, CV_FLAG_STR, P(vocab), 0, 0, "VOCAB.gguf",
      "copy this vocabulary (and chat template) in (default: a byte vocabulary)"),
    CV_FLAG_ROW("--seed", NULL, CV_FLAG_U64, P(seed), 0, 1.8e19, "S",
      "the weights' seed: the same seed, the same bytes (default 1)"),
    CV_FLAG_ROW("--threads", NULL, CV_FLAG_I32, offsetof(synth_opts, threads), 1, 1024, "N",
      "threads (default: every CPU; the output is the same)"),
    CV_FLAG_ROW("--output", "-o", CV_FLAG_STR, offsetof(synth_opts, out), 0, 0, "OUT.gguf",
      "where to write the model (required)"),
    CV_FLAG_ROW("--pooling", NULL, CV_FLAG_I32, P(pooling), 0, 3, "N",
      "write {arch}.pooling_type N, an embedding model's (1 mean, 2 cls,\n3 last; default 0: none)"),
    CV_FLAG_ROW("--fast", NULL, CV_FLAG_BOOL, P(fast), 0, 0, NULL,
      "an expert tensor draws 8 experts and repeats them, another matrix its first 1024 rows (benchmark shapes in "
      "minutes, not hours)"),
    CV_FLAG_ROW("--layers", NULL, CV_FLAG_I32, P(n_layer), 1, CV_MAX_LAYERS, "N",
      "the shape's first N layers only (a model too large for the machine, cut to what fits)"),
    CV_FLAG_ROW("--list", NULL, CV_FLAG_BOOL, offsetof(synth_opts, list), 0, 0, NULL,
      "list the architectures and shapes, and exit"),
};
#undef P
static const cv_cli_spec spec = { .name = "synth", .flags = flags, .n_flags = CV_ARRAY_LEN(flags) };

/* The architectures and shapes, from their tables. */
static void print_list(void)
{
    printf("architectures:");
    for (int i = 0; i < cv_n_archs; i++)
        printf(" %s", cv_archs[i]->name);
    printf("\nshapes:\n");
    for (int i = 0; i < cv_n_model_shapes; i++) {
        const cv_model_shape *s = &cv_model_shapes[i];
        printf("  %-22s %-9s %d layers, %d hidden", s->name, s->arch, s->n_layer, s->n_embd);
        if (s->n_expert)
            printf(", %d experts (%d used) of %d", s->n_expert, s->n_expert_used, s->n_ff_exp);
        printf("\n");
    }
}

int cv_cmd_synth(int argc, char **argv)
{
    synth_opts o = { .p = { .dtype = "f16", .seed = 1 } };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    if (o.list) {
        print_list();
        return 0;
    }
    cv_synth_params p = o.p;
    const char *out = o.out;
    int threads = o.threads;
    if (!p.shape || !out)
        return cv_cli_usage_error(&spec, "--shape and -o are required");
    const cv_model_shape *shape = cv_model_shape_find(p.shape);
    if (shape && !p.arch)
        p.arch = shape->arch;
    cv_err err = { 0 };
    cv_pool *pool = cv_pool_create(threads ? threads : cv_cpu_count(), &err);
    if (!pool) {
        fprintf(stderr, "corvid synth: %s\n", err.msg);
        return 1;
    }
    p.pool = pool;
    double t0 = cv_now_s();
    int rc = cv_model_synth(&p, out, &err);
    cv_pool_destroy(pool);
    if (rc) {
        fprintf(stderr, "corvid synth: %s\n", err.msg);
        return rc == CV_EINVAL ? 2 : 1;
    }
    fprintf(stderr, "corvid synth: wrote %s (%s, shape %s, %s, seed %llu) in %.1f s\n", out, p.arch, p.shape, p.dtype,
            (unsigned long long)p.seed, cv_now_s() - t0);
    return 0;
}
