/* fuzz_main.c — the plain driver that makes a fuzz target an ordinary
 * program where libFuzzer is not linked (the suite's gcc build): it calls
 * LLVMFuzzerTestOneInput once per file named on the command line, every
 * regular file of a named folder in name order, so the suite can build
 * every target and run it over its seed corpus (scripts/run-fuzz.sh seeds).
 * Arguments that start with '-' are libFuzzer's flags and are ignored, so
 * one command line drives either kind of binary. A target that ran no input
 * exits 77 (skipped; tests/CMakeLists.txt makes that a failure in CI): a
 * seed corpus that vanished must not pass as an empty success. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long n_ran;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    /* exactly the input's bytes: a read past them is ASan's to see */
    uint8_t *in = malloc(n ? n : 1);
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    n_ran++;
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: no such file or folder\n", path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path);
    struct dirent **names;
    int n = scandir(path, &names, NULL, by_name);
    if (n < 0) {
        fprintf(stderr, "%s: cannot list\n", path);
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, names[i]->d_name);
        struct stat s2;
        if (names[i]->d_name[0] != '.' && stat(sub, &s2) == 0 && S_ISREG(s2.st_mode))
            bad |= run_file(sub);
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv)
{
    int bad = 0;
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-')
            bad |= run_path(argv[i]);
    const char *name = strrchr(argv[0], '/');
    printf("%s: %ld inputs ran\n", name ? name + 1 : argv[0], n_ran);
    if (bad)
        return 1;
    return n_ran ? 0 : 77;
}
