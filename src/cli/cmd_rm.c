/* cmd_rm.c — `corvid rm MODEL...`: deletes models from the store (and any
 * partial download of them), then the folders left empty. It deletes only
 * inside the store: a MODEL that resolves to a file elsewhere is refused, so
 * a typo cannot remove a user's own file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/models.h"

/* Whether path is strictly below dir (both made canonical). */
static bool inside(const char *path, const char *dir)
{
    char rp[PATH_MAX], rd[PATH_MAX];
    if (!realpath(dir, rd))
        return false;
    if (!realpath(path, rp)) {
        /* A partial download only: check its folder instead. */
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s", path);
        char *sl = strrchr(tmp, '/');
        if (!sl)
            return false;
        *sl = 0;
        if (!realpath(tmp, rp))
            return false;
        size_t n = strlen(rd);
        return !strncmp(rp, rd, n) && (rp[n] == '/' || rp[n] == 0);
    }
    size_t n = strlen(rd);
    return !strncmp(rp, rd, n) && rp[n] == '/';
}

static bool remove_file(const char *path, bool *any, cv_err *err)
{
    if (unlink(path) == 0) {
        *any = true;
        return true;
    }
    if (errno != ENOENT) {
        cv_err_set(err, CV_EIO, "cannot delete %s: %s", path, strerror(errno));
        return false;
    }
    return true;
}

static const cv_cli_spec spec = { .name = "rm", .args = "MODEL...", .min_args = 1, .max_args = -1 };

int cv_cmd_rm(int argc, char **argv)
{
    int n_pos, st;
    if (!cv_cli_parse(&spec, NULL, argc, argv, &n_pos, &st))
        return st;
    char **pos = argv + 1;
    char store[PATH_MAX];
    cv_err err = { 0 };
    if (cv_models_dir(store, sizeof store, &err)) {
        fprintf(stderr, "corvid rm: %s\n", err.msg);
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < n_pos; i++) {
        cv_model_ref ref;
        if (cv_model_resolve(pos[i], &ref, &err) != 0) {
            fprintf(stderr, "corvid rm: %s\n", err.msg);
            failed++;
            continue;
        }
        if (!ref.path[0]) {
            fprintf(stderr, "corvid rm: no file of %s%s%s is in the store\n", ref.repo, ref.quant[0] ? ":" : "",
                    ref.quant);
            failed++;
            continue;
        }
        if (!inside(ref.path, store)) {
            fprintf(stderr, "corvid rm: %s is not in the store (%s); corvid rm deletes only models it pulled\n",
                    ref.path, store);
            failed++;
            continue;
        }
        char part[PATH_MAX + 16], meta[PATH_MAX + 32];
        snprintf(part, sizeof part, "%s.part", ref.path);
        snprintf(meta, sizeof meta, "%s.part.json", ref.path);
        bool any = false, had_part = access(part, F_OK) == 0;
        if (!remove_file(ref.path, &any, &err) || !remove_file(part, &any, &err) || !remove_file(meta, &any, &err)) {
            fprintf(stderr, "corvid rm: %s\n", err.msg);
            failed++;
            continue;
        }
        if (!any) {
            fprintf(stderr, "corvid rm: %s is not in the store\n", pos[i]);
            failed++;
            continue;
        }
        printf("deleted %s%s\n", ref.path, had_part ? " (and its partial download)" : "");
        /* Folders the model leaves empty, up to the store itself. */
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", ref.path);
        for (char *sl; (sl = strrchr(dir, '/')) && sl > dir;) {
            *sl = 0;
            if (strlen(dir) <= strlen(store) || rmdir(dir) != 0)
                break;
        }
    }
    return failed ? 1 : 0;
}
