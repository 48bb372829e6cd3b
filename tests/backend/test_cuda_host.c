/* test_cuda_host — the CUDA backend's host side on every machine, GPU or
 * not: the driver and NVRTC loaders say exactly what is missing (no
 * library, a library without a function corvid calls, the toolkit's stub,
 * no device, a card too old) and cv_backend_open then falls back to the
 * CPU; the kernel sources embedded in the binary are the ones in
 * src/backend/cuda/kernels; a compile cache key changes with everything
 * that decides the image. The fake drivers are tests/backend/fake_cuda.c
 * (FAKE_CUDA_LIB, FAKE_CUDA_NOLAUNCH_LIB). */
#include <dirent.h>
#include <stdlib.h>

#include "backend/cuda/cuda_int.h"
#include "test.h"

/* Opens the driver at path with FAKE_CUDA_MODE=mode; returns the rc and
 * leaves the message in err. */
static int driver_with(const char *path, const char *mode, cv_err *err)
{
    setenv("FAKE_CUDA_MODE", mode, 1);
    cv_cuda_driver d;
    cv_err_clear(err);
    const int rc = cv_cuda_driver_open(path, &d, err);
    if (rc == 0)
        cv_cuda_driver_close(&d);
    return rc;
}

TEST(driver_missing_says_so)
{
    cv_err err = { 0 };
    CHECK_EQ_INT(driver_with("/nonexistent/libcuda.so.1", "ok", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no NVIDIA driver") && strstr(err.msg, "/nonexistent/libcuda.so.1") &&
                  strstr(err.msg, "CORVID_LIBCUDA"),
              "%s", err.msg);
}

TEST(driver_without_a_function_names_it)
{
    cv_err err = { 0 };
    CHECK_EQ_INT(driver_with(FAKE_CUDA_NOLAUNCH_LIB, "ok", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "lacks cuLaunchKernel") && strstr(err.msg, FAKE_CUDA_NOLAUNCH_LIB), "%s", err.msg);
}

TEST(driver_states_from_cuinit)
{
    cv_err err = { 0 };
    CHECK_EQ_INT(driver_with(FAKE_CUDA_LIB, "stub", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "stub library, not a driver") && strstr(err.msg, "CUDA_ERROR_STUB_LIBRARY (34)"), "%s",
              err.msg);
    CHECK_EQ_INT(driver_with(FAKE_CUDA_LIB, "nodev", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no CUDA device") && strstr(err.msg, "CUDA_ERROR_NO_DEVICE"), "%s", err.msg);
    CHECK_EQ_INT(driver_with(FAKE_CUDA_LIB, "ok", &err), 0);
}

TEST(nvrtc_missing_says_so)
{
    cv_cuda_nvrtc n;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_cuda_nvrtc_open("/nonexistent/libnvrtc.so.13", &n, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no NVRTC") && strstr(err.msg, "/nonexistent/libnvrtc.so.13"), "%s", err.msg);
    /* a library that is not NVRTC: the driver fake lacks every nvrtc* */
    cv_err_clear(&err);
    CHECK_EQ_INT(cv_cuda_nvrtc_open(FAKE_CUDA_LIB, &n, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "lacks nvrtcVersion"), "%s", err.msg);
}

/* What cv_backend_open says and returns for name, with the driver at
 * libcuda in mode; a failure leaves the CPU backend to fall back on. */
static int open_with(const char *libcuda, const char *mode, const char *name, cv_err *err)
{
    setenv("CORVID_LIBCUDA", libcuda, 1);
    setenv("FAKE_CUDA_MODE", mode, 1);
    cv_err_clear(err);
    cv_backend *be = (cv_backend *)1;
    const int rc = cv_backend_open(name, &be, err);
    CHECK(rc ? be == NULL : be != NULL);
    return rc;
}

TEST(backend_open_fails_clearly_and_cpu_remains)
{
    cv_err err = { 0 };
    CHECK_EQ_INT(open_with("/nonexistent/libcuda.so.1", "ok", "cuda", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no NVIDIA driver"), "%s", err.msg);
    CHECK_EQ_INT(open_with(FAKE_CUDA_NOLAUNCH_LIB, "ok", "cuda:0", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "lacks cuLaunchKernel"), "%s", err.msg);
    CHECK_EQ_INT(open_with(FAKE_CUDA_LIB, "zero", "cuda", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no CUDA device"), "%s", err.msg);
    CHECK_EQ_INT(open_with(FAKE_CUDA_LIB, "ok", "cuda:3", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "cuda:3: this machine has one CUDA device, cuda:0"), "%s", err.msg);
    /* too old a card is refused before NVRTC is even looked for */
    CHECK_EQ_INT(open_with(FAKE_CUDA_LIB, "old", "cuda", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "cuda:0 (Fake GPU, sm_50): compute capability 5.0 is too old"), "%s", err.msg);
    /* no NVRTC: the device is found, the compiler is not */
    setenv("CORVID_LIBNVRTC", "/nonexistent/libnvrtc.so", 1);
    CHECK_EQ_INT(open_with(FAKE_CUDA_LIB, "ok", "cuda", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "cuda:0 (Fake GPU, sm_90)") && strstr(err.msg, "no NVRTC"), "%s", err.msg);
    unsetenv("CORVID_LIBNVRTC");
    CHECK_EQ_INT(open_with(FAKE_CUDA_LIB, "ok", "cuda:x", &err), CV_EINVAL);
    CHECK_MSG(strstr(err.msg, "expected cpu, cuda or cuda:N"), "%s", err.msg);
    CHECK_EQ_INT(open_with(FAKE_CUDA_LIB, "ok", "vulkan", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "it has: cpu, cuda[:N]"), "%s", err.msg);
    /* the fallback every caller takes */
    cv_backend *cpu = NULL;
    CHECK_EQ_INT(cv_backend_open("cpu", &cpu, &err), 0);
    CHECK(cpu == cv_backend_cpu());
    CHECK_EQ_STR(cv_backend_name(cpu), "cpu");
    unsetenv("CORVID_LIBCUDA");
}

TEST(old_card_message_names_the_minimum)
{
    cv_cuda_nvrtc n = { .major = 13, .minor = 0, .n_archs = 3, .archs = { 75, 80, 90 } };
    snprintf(n.path, sizeof n.path, "libnvrtc.so.13");
    cv_cuda_target t;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_cuda_target_for(&n, 52, &t, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "compute capability 5.2 is too old") && strstr(err.msg, "6.1"), "%s", err.msg);
    cv_err_clear(&err);
    CHECK_EQ_INT(cv_cuda_target_for(&n, 61, &t, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "compiles for sm_75 and newer; this GPU is sm_61"), "%s", err.msg);
    CHECK_EQ_INT(cv_cuda_target_for(&n, 80, &t, &err), 0);
    CHECK(t.sm == 80 && !t.ptx);
    /* a card newer than NVRTC: PTX of the newest it knows */
    CHECK_EQ_INT(cv_cuda_target_for(&n, 120, &t, &err), 0);
    CHECK(t.sm == 90 && t.ptx);
}

/* ---- embedded sources and the cache key ---- */

TEST(kernel_sources_are_embedded_as_they_are_on_disk)
{
    DIR *dir = opendir(CV_CUDA_KERNEL_DIR);
    CHECK(dir != NULL);
    if (!dir)
        return;
    int on_disk = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        const size_t n = strlen(e->d_name);
        if (!(n > 3 && !strcmp(e->d_name + n - 3, ".cu")) && !(n > 4 && !strcmp(e->d_name + n - 4, ".cuh")))
            continue;
        on_disk++;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", CV_CUDA_KERNEL_DIR, e->d_name);
        cv_buf text = { 0 };
        CHECK_EQ_INT(cv_read_file(path, &text, 1 << 24, NULL), 0);
        const cv_cuda_source *s = NULL;
        for (int i = 0; i < cv_cuda_n_sources; i++)
            if (!strcmp(cv_cuda_sources[i].name, e->d_name))
                s = &cv_cuda_sources[i];
        CHECK_MSG(s != NULL, "%s is not embedded", e->d_name);
        if (s) {
            CHECK_EQ_INT(s->len, text.len);
            CHECK_MSG(s->len == text.len && !memcmp(s->text, text.data, text.len) && s->text[s->len] == 0,
                      "%s: embedded text differs from the file", e->d_name);
        }
        cv_buf_free(&text);
    }
    closedir(dir);
    CHECK_EQ_INT(on_disk, cv_cuda_n_sources);
    CHECK(on_disk >= 4); /* common.cuh, dtypes.cuh, act.cu, mm.cu */
}

TEST(cache_key_changes_with_what_decides_the_image)
{
    cv_cuda_nvrtc n = { .major = 13, .minor = 0 };
    cv_cuda_target t = { .sm = 90 };
    cv_cuda_source *copy = cv_xcalloc((size_t)cv_cuda_n_sources, sizeof *copy);
    memcpy(copy, cv_cuda_sources, (size_t)cv_cuda_n_sources * sizeof *copy);
    char base[65], k[65];
    cv_cuda_rtc_key_in(copy, cv_cuda_n_sources, &n, &t, "mm.cu", "-DCV_WTYPE=12", base);
    cv_cuda_rtc_key(&n, &t, "mm.cu", "-DCV_WTYPE=12", k);
    CHECK_EQ_STR(k, base);
    cv_cuda_rtc_key_in(copy, cv_cuda_n_sources, &n, &t, "mm.cu", "-DCV_WTYPE=14", k);
    CHECK(strcmp(k, base) != 0);
    cv_cuda_rtc_key_in(copy, cv_cuda_n_sources, &n, &t, "act.cu", "-DCV_WTYPE=12", k);
    CHECK(strcmp(k, base) != 0);
    cv_cuda_target t2 = { .sm = 89 };
    cv_cuda_rtc_key_in(copy, cv_cuda_n_sources, &n, &t2, "mm.cu", "-DCV_WTYPE=12", k);
    CHECK(strcmp(k, base) != 0);
    cv_cuda_target t3 = { .sm = 90, .ptx = true };
    cv_cuda_rtc_key_in(copy, cv_cuda_n_sources, &n, &t3, "mm.cu", "-DCV_WTYPE=12", k);
    CHECK(strcmp(k, base) != 0);
    cv_cuda_nvrtc n2 = { .major = 13, .minor = 1 };
    cv_cuda_rtc_key_in(copy, cv_cuda_n_sources, &n2, &t, "mm.cu", "-DCV_WTYPE=12", k);
    CHECK(strcmp(k, base) != 0);
    /* one byte of the program, or of any header, changes the key; another
     * program's text does not */
    for (int i = 0; i < cv_cuda_n_sources; i++) {
        char *text = cv_xstrndup(cv_cuda_sources[i].text, cv_cuda_sources[i].len);
        text[cv_cuda_sources[i].len / 2] ^= 1;
        copy[i].text = text;
        cv_cuda_rtc_key_in(copy, cv_cuda_n_sources, &n, &t, "mm.cu", "-DCV_WTYPE=12", k);
        const char *name = cv_cuda_sources[i].name;
        const bool covered = !strcmp(name, "mm.cu") || strstr(name, ".cuh");
        CHECK_MSG(covered == (strcmp(k, base) != 0), "%s: key %s changed with one bit of its text", name,
                  covered ? "not" : "");
        copy[i] = cv_cuda_sources[i];
        free(text);
    }
    free(copy);
}

TEST(cache_dir_follows_the_environment)
{
    char dir[PATH_MAX];
    setenv("CORVID_CUDA_CACHE", "/tmp/x-cuda", 1);
    cv_cuda_cache_dir(dir, sizeof dir);
    CHECK_EQ_STR(dir, "/tmp/x-cuda");
    unsetenv("CORVID_CUDA_CACHE");
    setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
    cv_cuda_cache_dir(dir, sizeof dir);
    CHECK_EQ_STR(dir, "/tmp/xdg/corvid/cuda");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/someone", 1);
    cv_cuda_cache_dir(dir, sizeof dir);
    CHECK_EQ_STR(dir, "/home/someone/.cache/corvid/cuda");
}

TEST(describe_says_what_is_missing)
{
    setenv("CORVID_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    setenv("CORVID_LIBNVRTC", "/nonexistent/libnvrtc.so", 1);
    cv_buf out = { 0 };
    CHECK(!cv_cuda_describe(&out, "cuda       "));
    CHECK_MSG(strstr(out.data, "cuda       driver: no NVIDIA driver") && strstr(out.data, "NVRTC: no NVRTC") &&
                  strstr(out.data, "corvid runs on the CPU"),
              "%s", out.data);
    cv_buf_free(&out);
    unsetenv("CORVID_LIBCUDA");
    unsetenv("CORVID_LIBNVRTC");
}

int main(void)
{
    RUN(driver_missing_says_so);
    RUN(driver_without_a_function_names_it);
    RUN(driver_states_from_cuinit);
    RUN(nvrtc_missing_says_so);
    RUN(backend_open_fails_clearly_and_cpu_remains);
    RUN(old_card_message_names_the_minimum);
    RUN(kernel_sources_are_embedded_as_they_are_on_disk);
    RUN(cache_key_changes_with_what_decides_the_image);
    RUN(cache_dir_follows_the_environment);
    RUN(describe_says_what_is_missing);
    return test_report();
}
