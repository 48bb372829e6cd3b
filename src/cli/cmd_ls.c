/* cmd_ls.c — `corvid ls`: the models in the store, with what their GGUF
 * header says (quant, architecture, parameters, trained context), partial
 * downloads with how far they got, and files the reader rejects marked as
 * such; `--aliases` lists the alias table and which aliases are pulled;
 * `--json` gives the same as one JSON document for scripts. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/cli_int.h"
#include "cli/models.h"

static void human_count(int64_t c, char *out, size_t n)
{
    if (c <= 0) snprintf(out, n, "-");
    else if (c >= 1000000000) snprintf(out, n, "%.1fB", (double)c / 1e9);
    else if (c >= 1000000) snprintf(out, n, "%.0fM", (double)c / 1e6);
    else if (c >= 1000) snprintf(out, n, "%.0fK", (double)c / 1e3);
    else snprintf(out, n, "%lld", (long long)c);
}

static int list_aliases(bool json, const char *store)
{
    json_t *arr = json ? json_array() : NULL;
    if (!json)
        printf("%-24s %-8s %-7s %-5s %-26s %s\n", "ALIAS", "PULLED", "CONTEXT", "RUNS", "SAMPLING", "GGUF");
    for (int i = 0; i < cv_n_model_aliases; i++) {
        const cv_model_alias *a = &cv_model_aliases[i];
        char path[PATH_MAX];
        FILE *f = snprintf(path, sizeof path, "%s/%s/%s", store, a->repo, a->file) < (int)sizeof path
                      ? fopen(path, "rb")
                      : NULL;
        bool pulled = f != NULL;
        if (f)
            fclose(f);
        char samp[64];
        int k = snprintf(samp, sizeof samp, "T %.2g top-p %.2g", a->temperature, a->top_p);
        if (a->top_k > 0) k += snprintf(samp + k, sizeof samp - (size_t)k, " top-k %d", a->top_k);
        if (a->repeat_penalty > 0) snprintf(samp + k, sizeof samp - (size_t)k, " rep %.2g", a->repeat_penalty);
        cv_err why = { 0 };
        const bool runs = cv_model_alias_runnable(a, &why) == 0;
        if (json) {
            json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:f, s:f, s:i, s:f, s:f, s:b, s:b}",
                                                 "name", a->name, "repo", a->repo, "file", a->file, "summary",
                                                 a->summary, "architecture", a->arch, "context", (int)a->n_ctx,
                                                 "temperature", (double)a->temperature, "top_p", (double)a->top_p,
                                                 "top_k", (int)a->top_k, "min_p", (double)a->min_p, "repeat_penalty",
                                                 (double)a->repeat_penalty, "pulled", pulled, "runs", runs));
        } else {
            printf("%-24s %-8s %-7d %-5s %-26s %s/%s\n", a->name, pulled ? "yes" : "-", (int)a->n_ctx,
                   runs ? "yes" : "no", samp, a->repo, a->file);
            printf("%-24s   %s\n", "", a->summary);
            if (!runs)
                printf("%-24s   (%s)\n", "", why.msg);
        }
    }
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s);
        free(s);
        json_decref(arr);
    }
    return 0;
}

typedef struct ls_opts {
    bool json, aliases;
} ls_opts;

static const cv_flag flags[] = {
    CV_FLAG_ROW("--aliases", NULL, CV_FLAG_BOOL, offsetof(ls_opts, aliases), 0, 0, NULL,
      "the alias table (name, repo, quant, context, sampling) instead of the store"),
    CV_FLAG_ROW("--json", NULL, CV_FLAG_BOOL, offsetof(ls_opts, json), 0, 0, NULL,
      "one JSON array instead of the table"),

};
static const cv_cli_spec spec = { .name = "ls", .flags = flags, .n_flags = CV_ARRAY_LEN(flags) };

int cv_cmd_ls(int argc, char **argv)
{
    ls_opts o = { 0 };
    int n_args, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n_args, &st))
        return st;
    bool json = o.json, aliases = o.aliases;
    char store[PATH_MAX];
    cv_err err = { 0 };
    if (cv_models_dir(store, sizeof store, &err)) {
        fprintf(stderr, "corvid ls: %s\n", err.msg);
        return 1;
    }
    if (aliases)
        return list_aliases(json, store);
    cv_store_entry *v;
    int n;
    if (cv_store_list(store, &v, &n, &err)) {
        fprintf(stderr, "corvid ls: %s\n", err.msg);
        return 1;
    }
    json_t *arr = json ? json_array() : NULL;
    if (!json) {
        if (n == 0) {
            printf("no models in %s\n(pull one: corvid pull qwen3-0.6b; the aliases: corvid ls --aliases)\n", store);
            free(v);
            return 0;
        }
        printf("%-32s %9s %-8s %-10s %7s %8s  %s\n", "NAME", "SIZE", "QUANT", "ARCH", "PARAMS", "CONTEXT", "PATH");
    }
    int n_bad = 0;
    for (int i = 0; i < n; i++) {
        const cv_store_entry *e = &v[i];
        char name[PATH_MAX], size[32], params[32], ctx[32];
        cv_store_entry_name(e, name, sizeof name);
        cv_human_bytes(e->bytes, size, sizeof size);
        cv_model_facts f = { 0 };
        cv_err ferr = { 0 };
        const char *state = "ok";
        if (e->partial) {
            state = "partial";
            if (e->part_total > 0)
                snprintf(f.quant, sizeof f.quant, "%d%%", (int)(e->bytes * 100 / e->part_total));
            snprintf(f.arch, sizeof f.arch, "(partial)");
        } else if (cv_model_facts_read(e->path, &f, &ferr) != 0) {
            state = "invalid";
            snprintf(f.arch, sizeof f.arch, "(invalid)");
            n_bad++;
        }
        human_count(f.n_params, params, sizeof params);
        snprintf(ctx, sizeof ctx, f.n_ctx > 0 ? "%lld" : "-", (long long)f.n_ctx);
        if (json) {
            json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s}", "name", name, "path", e->path, "rel", e->rel, "bytes",
                                  (json_int_t)e->bytes, "state", state);
            if (!e->partial && !ferr.code) {
                json_t *facts = json_pack("{s:s, s:s, s:I, s:I}", "quant", f.quant, "arch", f.arch, "params",
                                          (json_int_t)f.n_params, "context", (json_int_t)f.n_ctx);
                json_object_update(o, facts);
                json_decref(facts);
            }
            if (ferr.code)
                json_object_set_new(o, "error", json_string(ferr.msg));
            if (e->partial)
                json_object_set_new(o, "total", json_integer(e->part_total));
            json_array_append_new(arr, o);
        } else {
            printf("%-32s %9s %-8s %-10s %7s %8s  %s\n", name, size, f.quant[0] ? f.quant : "-",
                   f.arch[0] ? f.arch : "-", params, ctx, e->path);
            if (ferr.code)
                printf("    ! %s\n", ferr.msg);
        }
    }
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s);
        free(s);
        json_decref(arr);
    }
    free(v);
    return 0;
}
