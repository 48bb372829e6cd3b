/* cmd_synth.c — `corvid synth`: writes a random-weight model with a real
 * architecture's shape and a llama-quantize-like type mix (model/synth.c),
 * for tests and benchmarks. Deterministic for a seed at any thread count;
 * --vocab copies a vocab-only GGUF's tokenizer (and chat template) in. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "model/model.h"

/* The usage, then the architectures and shapes from their tables. */
static void print_help(const cv_cmd *cmd)
{
    printf("%s\n\nusage: %s\n\narchitectures:", cmd->summary, cmd->usage);
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
    printf("--fast: an expert tensor draws 8 experts and repeats them (benchmark shapes in minutes, not hours)\n");
}

int cv_cmd_synth(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("synth");
    cv_synth_params p = { .dtype = "f16", .seed = 1 };
    const char *out = NULL;
    int threads = 0;
    static const struct option opts[] = {
        { "arch", required_argument, 0, 'a' },  { "shape", required_argument, 0, 's' },
        { "dtype", required_argument, 0, 'd' }, { "vocab", required_argument, 0, 'v' },
        { "seed", required_argument, 0, 'S' },  { "threads", required_argument, 0, 't' },
        { "output", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' },
        { "fast", no_argument, 0, 'f' },
        { 0, 0, 0, 0 },
    };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'a': p.arch = optarg; break;
        case 's': p.shape = optarg; break;
        case 'd': p.dtype = optarg; break;
        case 'v': p.vocab = optarg; break;
        case 'o': out = optarg; break;
        case 'f': p.fast = true; break;
        case 'S':
            errno = 0;
            p.seed = strtoull(optarg, &end, 10);
            if (errno || *end || end == optarg)
                return cv_cli_usage_error(cmd, "--seed '%s' must be a non-negative integer", optarg);
            break;
        case 't':
            threads = (int)strtol(optarg, &end, 10);
            if (*end || threads < 1 || threads > 1024)
                return cv_cli_usage_error(cmd, "--threads '%s' must be 1..1024", optarg);
            break;
        case 'h': print_help(cmd); return 0;
        default: return cv_cli_usage_error(cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc)
        return cv_cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!p.shape || !out)
        return cv_cli_usage_error(cmd, "--shape and -o are required");
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
