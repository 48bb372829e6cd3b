/* fuzz_model_spec.c — libFuzzer target for the MODEL resolver and the
 * hub-file picker (src/cli/models_dir.c): the first line of the input is a
 * MODEL argument, the rest a repo's file list as the hub's API would send it.
 * Checks the resolver's promise that every store path it builds stays inside
 * the store, whatever the argument. The store is an absent folder, so no
 * file is read. The cli is not a library: its sources are included here. */
#include <stdlib.h>

#include "../src/cli/aliases.c"
#include "../src/cli/models_dir.c"

#define STORE "/nonexistent-corvid-fuzz-store"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setenv("CORVID_MODELS", STORE, 1);
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    char *nl = strchr(s, '\n');
    char *rest = nl ? nl + 1 : s + size;
    if (nl)
        *nl = 0;
    cv_model_ref r;
    if (cv_model_resolve(s, &r, NULL) == 0 && r.kind == CV_MODEL_REMOTE && r.path[0]) {
        /* A remote form maps below the store, never above it. */
        if (strncmp(r.path, STORE "/", sizeof STORE) || strstr(r.path, "/../") || strstr(r.path, "/./"))
            abort();
    }
    const char *names[64];
    int n = 0;
    for (char *p = rest; *p && n < 64;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = 0;
        names[n++] = p;
        if (!e)
            break;
        p = e + 1;
    }
    int k = cv_model_pick_file(names, n, n ? names[0] : "", "fuzz/repo", NULL);
    if (k >= n)
        abort();
    k = cv_model_pick_file(names, n, "", "fuzz/repo", NULL);
    if (k >= n)
        abort();
    char q[32];
    for (int i = 0; i < n; i++)
        cv_model_quant_of_name(names[i], q, sizeof q);
    free(s);
    return 0;
}
