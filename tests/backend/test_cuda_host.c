/* test_cuda_host — the CUDA backend's host side on every machine, GPU or
 * not, CI included: the driver and NVRTC loaders say exactly what is
 * missing (no library, a library without a function corvid calls, the
 * toolkit's stub, no device, a card too old, a driver older than the
 * NVRTC) and cv_backend_open then falls back to the CPU; the kernel
 * sources embedded in the binary are the ones in src/backend/cuda/kernels;
 * a compile cache key changes with everything that decides the image, and
 * the cache misses, hits and prunes; and the backend itself, over fake
 * libraries, opens a device, takes every weight type, launches what each
 * operation needs, addresses a K/V pool's blocks as the CPU lays them out
 * (one run or several: the kernels' kv_addr.cuh, compiled here as C), and
 * reports out-of-memory and failed launches.
 *
 * The fakes are tests/backend/fake_cuda.c (libcuda.so.1: memory in host
 * RAM, launches counted; FAKE_CUDA_LIB, and FAKE_CUDA_NOLAUNCH_LIB without
 * cuLaunchKernel) and fake_nvrtc.c (FAKE_NVRTC_LIB: a PTX text that names
 * no kernel but that the fake driver loads). */
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/cuda/cuda_int.h"
#include "cuda_test.h"
#include "model/synth.h"
#include "test.h"

/* kv_addr.cuh read as C, with what its header asks of its includer (the
 * kernels' types and function qualifiers): the device's K/V addressing. */
typedef int32_t i32;
typedef int64_t i64;
typedef uint8_t u8;
#define CV_KV_FN static inline
#include "kv_addr.cuh"

static char g_tmp[64]; /* mkdtemp's /tmp/cv_cuda_host_XXXXXX */

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

TEST(driver_older_than_nvrtc_is_refused)
{
    cv_err err = { 0 };
    setenv("CORVID_LIBNVRTC", FAKE_NVRTC_LIB, 1);
    setenv("FAKE_CUDA_DRIVER", "12080", 1); /* a CUDA 12.8 driver, NVRTC 13.0 */
    CHECK_EQ_INT(open_with(FAKE_CUDA_LIB, "ok", "cuda", &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "supports CUDA 12.8, older than NVRTC 13.0") &&
                  strstr(err.msg, "the NVRTC of CUDA 12.8 or older"),
              "%s", err.msg);
    /* a newer minor of the same major loads cubins (sm_90 is native here) */
    setenv("FAKE_CUDA_DRIVER", "13000", 1);
    setenv("FAKE_NVRTC_VERSION", "13.1", 1);
    cv_cuda_nvrtc n;
    CHECK_EQ_INT(cv_cuda_nvrtc_open(FAKE_NVRTC_LIB, &n, &err), 0);
    CHECK(n.major == 13 && n.minor == 1);
    cv_cuda_nvrtc_close(&n);
    unsetenv("FAKE_NVRTC_VERSION");
    unsetenv("FAKE_CUDA_DRIVER");
    unsetenv("CORVID_LIBNVRTC");
    unsetenv("CORVID_LIBCUDA");
}

/* Runs `corvid doctor --quick --threads 1 [model]` in this process's
 * environment; its exit status, and its stdout into out. */
static int doctor(const char *model, cv_buf *out)
{
    char cmd[PATH_MAX + 256];
    snprintf(cmd, sizeof cmd, "'%s' doctor --quick --threads 1 %s 2>/dev/null", CV_RELEASE_BIN, model ? model : "");
    cv_buf_reset(out);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        cv_buf_append(out, chunk, n);
    return pclose(f);
}

/* `corvid doctor` (the release binary, which `make test` builds first)
 * says why there is no GPU; with one, which, and where a model would go:
 * llama3.1-8b in Q4_K_M (a sparse file: the index without the data) on a
 * 24 GiB card all fits. */
TEST(doctor_says_what_cuda_this_machine_has)
{
    cv_buf out = { 0 };
    setenv("CORVID_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    CHECK_EQ_INT(doctor(NULL, &out), 0);
    CHECK_MSG(out.data &&
                  strstr(out.data, "cuda       driver: no NVIDIA driver: /nonexistent/libcuda.so.1 cannot be opened") &&
                  strstr(out.data, "cuda       no usable CUDA device: corvid runs on the CPU"),
              "%s", out.data ? out.data : "");

    char model[96];
    snprintf(model, sizeof model, "%s/llama8b.gguf", g_tmp);
    cv_synth_params sp = { .arch = "llama", .shape = "llama3.1-8b", .dtype = "q4_k_m", .seed = 1, .sparse = true };
    cv_err err = { 0 };
    CHECK_MSG(cv_model_synth(&sp, model, &err) == 0, "%s", err.msg);
    setenv("CORVID_LIBCUDA", FAKE_CUDA_LIB, 1);
    setenv("CORVID_LIBNVRTC", FAKE_NVRTC_LIB, 1);
    setenv("FAKE_CUDA_MODE", "ok", 1);
    setenv("FAKE_CUDA_MEM", "25769803776", 1); /* 24 GiB */
    doctor(model, &out); /* its status says whether the model fits this machine's RAM: not this test's matter */
    CHECK_MSG(out.data && strstr(out.data, "cuda       cuda:0 Fake GPU, sm_90, 132 SMs, 24.0 GiB") &&
                  strstr(out.data, "on cuda:0 (Fake GPU), chosen: all 32 layers and the output on the device"),
              "%s", out.data ? out.data : "");
    unsetenv("FAKE_CUDA_MEM");
    unsetenv("CORVID_LIBNVRTC");
    unsetenv("CORVID_LIBCUDA");
    cv_buf_free(&out);
    unlink(model);
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
    CHECK(on_disk >= 9); /* common.cuh, dtypes.cuh, kv.cuh, kv_addr.cuh, act.cu, rows.cu, attn.cu, moe.cu, mm.cu */
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
    const char *home = getenv("HOME");
    char *saved = home ? cv_xstrdup(home) : NULL;
    setenv("HOME", "/home/someone", 1);
    cv_cuda_cache_dir(dir, sizeof dir);
    CHECK_EQ_STR(dir, "/home/someone/.cache/corvid/cuda");
    /* back to the test's own cache: the backend's tests below compile */
    if (saved)
        setenv("HOME", saved, 1);
    free(saved);
    snprintf(dir, sizeof dir, "%s/backend", g_tmp);
    setenv("CORVID_CUDA_CACHE", dir, 1);
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

static int count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

TEST(cache_misses_then_hits_and_prunes_stale_keys)
{
    cv_cuda_nvrtc rtc;
    cv_err err = { 0 };
    CHECK_MSG(cv_cuda_nvrtc_open(FAKE_NVRTC_LIB, &rtc, &err) == 0, "%s", err.msg);
    if (err.code)
        return;
    const cv_cuda_target t = { .sm = 90 };
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/cache", g_tmp);
    cv_buf a = { 0 }, b = { 0 };
    bool hit = true;
    CHECK_EQ_INT(cv_cuda_rtc_get(&rtc, &t, dir, "act.cu", "", &a, &hit, &err), 0);
    CHECK(!hit);
    CHECK_EQ_INT(count_files(dir, "act.cu-"), 1);
    CHECK_EQ_INT(cv_cuda_rtc_get(&rtc, &t, dir, "act.cu", "", &b, &hit, &err), 0);
    CHECK(hit);
    CHECK(a.len == b.len && !memcmp(a.data, b.data, a.len));
    /* an image of an older key, for the same program and target, goes when
     * a new one is written */
    char stale[PATH_MAX + 64];
    snprintf(stale, sizeof stale, "%s/act.cu-sm_%d-0123456789abcdef.cubin", dir, t.sm);
    CHECK_EQ_INT(cv_write_file_atomic(stale, "x", 1, &err), 0);
    char keep[PATH_MAX + 64];
    snprintf(keep, sizeof keep, "%s/mm.cu-DCV_WTYPE=8-sm_%d-0123456789abcdef.cubin", dir, t.sm);
    CHECK_EQ_INT(cv_write_file_atomic(keep, "x", 1, &err), 0);
    CHECK_EQ_INT(count_files(dir, "act.cu-"), 2);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) /* drop the good image: the next get compiles again */
        if (!strncmp(e->d_name, "act.cu-", 7) && !strstr(e->d_name, "0123456789abcdef")) {
            char p[PATH_MAX + 300];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    CHECK_EQ_INT(cv_cuda_rtc_get(&rtc, &t, dir, "act.cu", "", &b, &hit, &err), 0);
    CHECK(!hit);
    CHECK_EQ_INT(count_files(dir, "act.cu-"), 1);
    CHECK(access(stale, F_OK) != 0);
    CHECK(access(keep, F_OK) == 0); /* another program's file stays */
    /* no directory: compiled, not cached */
    CHECK_EQ_INT(cv_cuda_rtc_get(&rtc, &t, "", "act.cu", "", &b, &hit, &err), 0);
    CHECK(!hit && b.len > 0);
    cv_buf_free(&a);
    cv_buf_free(&b);
    cv_cuda_nvrtc_close(&rtc);
}

/* ---- the backend over the fake driver ---- */

static int (*fake_launches)(void);

/* cuda:0 over the fake driver and NVRTC (opened once: the backend of a
 * device lives as long as the process). */
static cv_backend *fake_backend(void)
{
    setenv("CORVID_LIBCUDA", FAKE_CUDA_LIB, 1);
    setenv("CORVID_LIBNVRTC", FAKE_NVRTC_LIB, 1);
    setenv("FAKE_CUDA_MODE", "ok", 1);
    cv_backend *be = NULL;
    cv_err err = { 0 };
    CHECK_MSG(cv_backend_open("cuda", &be, &err) == 0, "%s", err.msg);
    void *h = dlopen(FAKE_CUDA_LIB, RTLD_NOW | RTLD_NOLOAD);
    fake_launches = h ? (int (*)(void))dlsym(h, "fake_cuda_launches") : NULL;
    CHECK(fake_launches != NULL);
    return fake_launches ? be : NULL;
}

TEST(backend_over_fake_driver_takes_every_weight_type)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    CHECK_EQ_STR(cv_backend_name(be), "cuda");
    /* the whole table of this ABI, as the CPU backend's */
    const cv_backend_ops *ops = be->ops;
    CHECK_EQ_INT(ops->abi, CV_BACKEND_ABI);
    CHECK(ops->mat_create && ops->mat_destroy && ops->mat_path && ops->stream_create && ops->stream_destroy &&
          ops->stream_threads && ops->stream_set_threads && ops->sync && ops->matmul && ops->experts_ws_create &&
          ops->experts_ws_destroy && ops->matmul_experts && ops->rows_alloc && ops->rows_free && ops->upload &&
          ops->download && ops->rmsnorm && ops->add && ops->scale && ops->glu && ops->sigmoid_mul && ops->softcap &&
          ops->attn_rows && ops->moe_route && ops->moe_glu && ops->moe_sum && ops->deltanet_ws_create &&
          ops->deltanet_ws_destroy && ops->deltanet && ops->attention_ws_create && ops->attention_ws_destroy &&
          ops->attention && ops->mla_rows && ops->mla_latent && ops->mla_ws_create && ops->mla_ws_destroy &&
          ops->mla_dec && ops->embed_rows);
    cv_cuda_device_info di;
    cv_cuda_device_get(be, &di);
    CHECK_EQ_STR(di.name, "Fake GPU");
    CHECK_EQ_INT(di.sm, 90);
    CHECK_EQ_INT(di.n_sm, 132);
    cv_bstream *st;
    cv_err err = { 0 };
    CHECK_MSG(cv_bstream_create(be, 0, &st, &err) == 0, "%s", err.msg);
    CHECK_EQ_INT(cv_bstream_threads(st), 1);
    cv_bstream_set_threads(st, 4); /* a device's stream ignores it */
    CHECK_EQ_INT(cv_bstream_threads(st), 1);
    uint32_t types[CV_GGML_TYPE_COUNT];
    const int n = weight_types(types);
    CHECK_EQ_INT(n, 16);
    const int64_t n_in = 512, n_out = 8;
    float *x, *y;
    CHECK_EQ_INT(cv_cuda_alloc(be, 64 * n_in * sizeof(float), (void **)&x, &err), 0);
    CHECK_EQ_INT(cv_cuda_alloc(be, 64 * n_out * sizeof(float), (void **)&y, &err), 0);
    for (int i = 0; i < n; i++) {
        const cv_dtype *dt = cv_dtype_get(types[i]);
        const size_t bytes = (size_t)(n_in / dt->block_elems) * dt->block_bytes * (size_t)n_out;
        uint8_t *w = cv_xcalloc(1, bytes);
        cv_bmat *m = NULL;
        cv_err_clear(&err);
        const int rc = cv_bmat_create(be, types[i], n_in, n_out, w, bytes, &m, &err);
        CHECK_MSG(rc == 0, "%s: %s", dt->name, err.msg);
        free(w);
        if (rc)
            continue;
        CHECK(m->owns_data && m->bytes == bytes && m->type == types[i]);
        CHECK(strstr(be->ops->mat_path(m), "cuda") != NULL);
        /* quantized weights quantize the activations first: two launches */
        for (int64_t n_tok = 1; n_tok <= 64; n_tok *= 4) {
            const int before = fake_launches();
            cv_be_matmul(st, m, n_tok, x, n_in, y, n_out);
            CHECK_EQ_INT(fake_launches() - before, dt->is_quantized ? 2 : 1);
        }
        cv_bmat_destroy(be, m);
    }
    cv_bstream_sync(st);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), 0);
    cv_cuda_free(be, x);
    cv_cuda_free(be, y);
    cv_bstream_destroy(st);
    /* act.cu and mm.cu once per type, compiled into the cache */
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/backend", g_tmp);
    CHECK_EQ_INT(count_files(dir, "act.cu-sm_90-"), 1);
    CHECK_EQ_INT(count_files(dir, "mm.cu-DCV_WTYPE="), n);
}

TEST(backend_refuses_what_it_cannot_hold)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    cv_bmat *m = NULL;
    cv_err err = { 0 };
    uint8_t w[4096] = { 0 };
    CHECK_EQ_INT(cv_bmat_create(be, CV_GGML_Q8_K, 256, 1, w, 292, &m, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no matmul kernel for tensor type") && strstr(err.msg, "q8_K"), "%s", err.msg);
    CHECK_EQ_INT(cv_bmat_create(be, CV_GGML_Q4_K, 256, 2, w, 144, &m, &err), CV_EINVAL);
    CHECK_EQ_INT(cv_bmat_create(be, CV_GGML_Q4_K, 100, 1, w, 144, &m, &err), CV_EINVAL);
    /* out of device memory: the size, the matrix and what is free */
    setenv("FAKE_CUDA_MEM", "1048576", 1);
    const int64_t n_in = 4096, n_out = 4096;
    const size_t bytes = (size_t)(n_in / 256) * 144 * n_out;
    uint8_t *big = cv_xcalloc(1, bytes);
    cv_err_clear(&err);
    CHECK_EQ_INT(cv_bmat_create(be, CV_GGML_Q4_K, n_in, n_out, big, bytes, &m, &err), CV_ENOMEM);
    CHECK_MSG(strstr(err.msg, "cuda:0: out of memory: a 4096 x 4096 q4_K matrix takes 9.0 MiB") &&
                  strstr(err.msg, "free of 1.0 MiB"),
              "%s", err.msg);
    free(big);
    unsetenv("FAKE_CUDA_MEM");
}

TEST(failed_launch_is_recorded_and_stops_the_stream)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    cv_bstream *st;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_bstream_create(be, 0, &st, &err), 0);
    uint8_t w[2 * 34 * 4] = { 0 };
    cv_bmat *m = NULL;
    CHECK_EQ_INT(cv_bmat_create(be, CV_GGML_Q8_0, 64, 4, w, sizeof w, &m, &err), 0);
    float *x, *y;
    CHECK_EQ_INT(cv_cuda_alloc(be, 64 * sizeof(float), (void **)&x, &err), 0);
    CHECK_EQ_INT(cv_cuda_alloc(be, 4 * sizeof(float), (void **)&y, &err), 0);
    setenv("FAKE_CUDA_MODE", "launchfail", 1);
    cv_be_matmul(st, m, 1, x, 64, y, 4);
    setenv("FAKE_CUDA_MODE", "ok", 1);
    const int before = fake_launches();
    cv_be_matmul(st, m, 1, x, 64, y, 4); /* skipped: the stream has failed */
    CHECK_EQ_INT(fake_launches(), before);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_EIO);
    CHECK_MSG(strstr(err.msg, "quantizing activations") && strstr(err.msg, "CUDA_ERROR_LAUNCH_FAILED (719)"), "%s",
              err.msg);
    /* read and cleared: the stream works again */
    cv_be_matmul(st, m, 1, x, 64, y, 4);
    CHECK_EQ_INT(fake_launches(), before + 2);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), 0);
    cv_bmat_destroy(be, m);
    cv_cuda_free(be, x);
    cv_cuda_free(be, y);
    cv_bstream_destroy(st);
}

TEST(expert_matmul_groups_many_routes)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    cv_bstream *st;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_bstream_create(be, 0, &st, &err), 0);
    enum { E = 4, N_IN = 256, N_OUT = 16 };
    uint8_t w[144 * N_OUT] = { 0 };
    cv_bmat *m[E];
    for (int e = 0; e < E; e++)
        CHECK_EQ_INT(cv_bmat_create(be, CV_GGML_Q4_K, N_IN, N_OUT, w, sizeof w, &m[e], &err), 0);
    cv_experts_ws *ws = cv_be_experts_ws_create(st, 64, N_IN, N_OUT, E);
    CHECK(ws != NULL);
    float *x, *y;
    int32_t *ids;
    CHECK_EQ_INT(cv_cuda_alloc(be, 64 * N_IN * sizeof(float), (void **)&x, &err), 0);
    CHECK_EQ_INT(cv_cuda_alloc(be, 64 * N_OUT * sizeof(float), (void **)&y, &err), 0);
    CHECK_EQ_INT(cv_cuda_alloc(be, 64 * sizeof(int32_t), (void **)&ids, &err), 0);
    /* few routes: quantize + one launch a route set; many: + grouping */
    int before = fake_launches();
    cv_be_matmul_experts(st, (const cv_bmat *const *)m, E, 8, x, N_IN, 8, ids, NULL, y, N_OUT, ws);
    CHECK_EQ_INT(fake_launches() - before, 2);
    before = fake_launches();
    cv_be_matmul_experts(st, (const cv_bmat *const *)m, E, 64, x, N_IN, 64, ids, NULL, y, N_OUT, ws);
    CHECK_EQ_INT(fake_launches() - before, 3);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), 0);
    cv_be_experts_ws_destroy(st, ws);
    for (int e = 0; e < E; e++)
        cv_bmat_destroy(be, m[e]);
    cv_cuda_free(be, x);
    cv_cuda_free(be, y);
    cv_cuda_free(be, ids);
    cv_bstream_destroy(st);
}

/* Activation rows over the fake: memory round-trips, each row operation
 * is one launch (its host inputs copied first), out-of-memory is NULL. */
TEST(row_operations_launch_once_each)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    cv_bstream *st;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_bstream_create(be, 0, &st, &err), 0);
    enum { ROWS = 3, N = 300 };
    float host[ROWS * N], back[ROWS * N], w[N];
    int32_t gather[ROWS] = { 2, 0, 1 };
    for (int i = 0; i < ROWS * N; i++)
        host[i] = (float)i;
    for (int i = 0; i < N; i++)
        w[i] = 1.0f;
    float *x = cv_be_rows_alloc(be, sizeof host), *y = cv_be_rows_alloc(be, sizeof host);
    CHECK(x && y);
    cv_be_upload(st, x, host, sizeof host);
    cv_be_download(st, back, x, sizeof back);
    CHECK(!memcmp(host, back, sizeof host));
    const int before = fake_launches();
    cv_be_rmsnorm(st, ROWS, N, x, N, gather, w, 1e-6f, y, N);
    cv_be_rmsnorm(st, ROWS, N, x, N, NULL, NULL, 1e-6f, y, N);
    cv_be_add(st, ROWS, N, y, N, x, N, x, N);
    cv_be_add(st, ROWS, N, y, N, y, N, w, 0); /* a bias: host memory */
    cv_be_scale(st, ROWS, N, y, N, 0.5f);
    const cv_bact acts[] = { { .kind = CV_BGLU_SILU }, { .kind = CV_BGLU_GELU_TANH },
                             { .kind = CV_BGLU_SILU_CLAMPED, .alpha = 1.702f, .limit = 7.0f } };
    for (size_t i = 0; i < CV_ARRAY_LEN(acts); i++)
        cv_be_glu(st, &acts[i], ROWS, N, y, N, x, N, x, N);
    cv_be_sigmoid_mul(st, ROWS, N, y, N, x, N, x, N);
    cv_be_softcap(st, ROWS, N, y, N, 30.0f);
    cv_be_scale(st, 0, N, y, N, 2.0f); /* no rows: nothing */
    /* the attention rows with every host input (biases, norms, RoPE
     * factors, positions, blocks) into a cache in device memory */
    float ff[2] = { 1.0f, 2.0f };
    const cv_rope_params rope = { .style = CV_ROPE_NEOX, .n_rot = 4, .theta = 1e4f, .freq_factors = ff };
    int32_t pos[ROWS] = { 0, 1, 17 }, blk[ROWS] = { 0, 0, 1 };
    kv_pool kv = { .n_blocks = 2, .n_layer = 1, .n_head_kv = 1, .head_dim = 4, .n_parts = 2, .type = CV_GGML_F16,
                   .qgroup = 4, .elt_bytes = 2, .head_bytes = kv_head_bytes(4, CV_GGML_F16),
                   .block_bytes = kv_block_bytes(1, 2, 1, 4, CV_GGML_F16) };
    kv.data = cv_be_rows_alloc(be, kv.block_bytes * 2);
    CHECK(kv.data != NULL);
    const cv_batt_rows att = { .n_rows = ROWS, .qkv = x, .ld_qkv = N, .gate = y, .ld_gate = N, .n_head = 2,
                               .n_head_kv = 1, .head_dim = 4, .gated = true, .v_norm = true, .store_kv = true,
                               .q_bias = w, .k_bias = w, .v_bias = w, .q_norm = w, .k_norm = w, .eps = 1e-6f,
                               .rope = &rope, .pos = pos, .temp_scale = 0.1f, .temp_len = 8, .kv = &kv,
                               .kv_block = blk };
    cv_be_attn_rows(st, &att);
    /* the router with its three host inputs, routes in device memory */
    int32_t *ids = cv_be_rows_alloc(be, 2 * ROWS * sizeof(int32_t));
    CHECK(ids != NULL);
    const cv_bmoe_route route = { .n_rows = ROWS, .n_expert = 8, .k = 2, .logits = x, .ld_logits = N,
                                  .kind = CV_BROUTE_SIGMOID_TOPK, .bias = w, .sel_bias = w, .n_group = 4,
                                  .n_group_used = 2, .norm = true, .scale = 2.5f, .exp_scale = w, .expert = ids,
                                  .src = ids + ROWS, .weight = y };
    cv_be_moe_route(st, &route);
    /* the rows around the expert matmuls: each route's activation with its
     * bias tables, each row's sum with the shared expert (a launch each) */
    const cv_bact silu = { .kind = CV_BGLU_SILU };
    const cv_bmoe_rows mr = { .n_rows = ROWS, .k = 2, .n_expert = 1, .expert = ids, .weight = y, .act = &silu,
                              .n_ff = N / 2, .gu = x, .ld_gu = N, .gate_bias = w, .up_bias = w, .h = y, .ld_h = N,
                              .n = N, .y = x, .ldy = N, .down_bias = w, .post_norm = w, .eps = 1e-6f, .shared = y,
                              .ld_shared = N, .sh_post_norm = w, .sh_gate = w, .x = x, .ldx = N, .out = y,
                              .ld_out = N };
    cv_be_moe_glu(st, &mr);
    cv_be_moe_sum(st, &mr);
    /* embedding rows: the named rows of a host table copied in, one
     * launch of the type's program */
    uint8_t table[4 * 2 * 34] = { 0 };
    cv_be_embed_rows(st, CV_GGML_Q8_0, 64, table, 4, ROWS, blk, 2.0f, y, N);
    CHECK_EQ_INT(fake_launches() - before, 15);
    cv_bstream_sync(st);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), 0);
    cv_be_rows_free(be, kv.data);
    cv_be_rows_free(be, ids);
    /* more rows than a launch takes: the stream fails, saying so */
    cv_be_scale(st, 70000, 1, y, 1, 2.0f);
    CHECK_EQ_INT(fake_launches() - before, 15);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_ELIMIT);
    CHECK_MSG(strstr(err.msg, "scale over more than 65535 rows"), "%s", err.msg);
    /* a table of a type no kernel reads */
    uint8_t q8_k[292] = { 0 };
    cv_be_embed_rows(st, CV_GGML_Q8_K, 256, q8_k, 1, 1, blk, 1.0f, y, N);
    CHECK_EQ_INT(fake_launches() - before, 15);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "no kernel reads this token embedding's type"), "%s", err.msg);
    /* the Gated DeltaNet mixer, which has no kernels yet: no workspace, and
     * the pass fails the stream saying so */
    CHECK(cv_be_deltanet_ws_create(st, ROWS, 2, 4, 16) == NULL);
    const cv_bdeltanet dn = { .n_rows = ROWS };
    cv_be_deltanet(st, &dn, NULL);
    CHECK_EQ_INT(fake_launches() - before, 15);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "Gated DeltaNet mixer has no CUDA kernels yet"), "%s", err.msg);
    /* attention over the paged cache, likewise */
    const cv_att_ws_shape shape = { .max_rows = 4, .max_hd = 64, .max_hd_v = 64, .hd_div = 64 };
    CHECK(cv_be_attention_ws_create(st, &shape) == NULL);
    cv_be_attention(st, &(cv_batt){ .n_items = 1 }, NULL);
    CHECK_EQ_INT(fake_launches() - before, 15);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "attention over the paged cache has no CUDA kernels yet"), "%s", err.msg);
    /* multi-head latent attention's passes, likewise */
    CHECK(cv_be_mla_ws_create(st, 4, 2, 16, 16, 16) == NULL);
    cv_be_mla_rows(st, &(cv_bmla_rows){ .n_rows = 1 });
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "multi-head latent attention has no CUDA kernels yet"), "%s", err.msg);
    cv_be_mla_latent(st, NULL, 0, NULL, 0, 16, y);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_EUNSUPPORTED);
    cv_be_mla_dec(st, &(cv_bmla_dec){ .n_q = 1 }, NULL);
    CHECK_EQ_INT(fake_launches() - before, 15);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_EUNSUPPORTED);
    setenv("FAKE_CUDA_MEM", "1048576", 1);
    CHECK(cv_be_rows_alloc(be, (size_t)64 << 20) == NULL);
    unsetenv("FAKE_CUDA_MEM");
    cv_be_rows_free(be, x);
    cv_be_rows_free(be, y);
    cv_bstream_destroy(st);
}

/* The K/V store's addresses on the device (kv_addr.cuh, given the pool
 * as attn_rows passes it to the kernel) are the CPU pool's (kv_k, kv_v)
 * at every block, layer and head, for each cache type: a pool of one run
 * (run_shift 0), one in runs of 4 blocks, the last partly used, and one in
 * kv_pool_init's runs of CV_KV_RUN_BLOCKS; so a block holds the same bytes
 * whoever wrote it. */
TEST(kv_store_addresses_the_cpus_pool_layout)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    void *h = dlopen(FAKE_CUDA_LIB, RTLD_NOW | RTLD_NOLOAD);
    void (*keep)(size_t) = h ? (void (*)(size_t))dlsym(h, "fake_cuda_keep") : NULL;
    const void *(*kept)(void) = h ? (const void *(*)(void))dlsym(h, "fake_cuda_kept") : NULL;
    CHECK(keep && kept);
    cv_bstream *st;
    cv_err err = { 0 };
    if (!keep || !kept || cv_bstream_create(be, 0, &st, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return;
    }
    enum { ROWS = 2, HEADS = 2, KV_HEADS = 2, HD = 32, LAYERS = 3, LD = (HEADS + 2 * KV_HEADS) * HD };
    static const struct { int32_t n_blocks, run_shift; } shapes[] = { { 10, 0 }, { 10, 2 }, { 130, CV_KV_RUN_SHIFT } };
    static const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    const cv_rope_params rope = { .style = CV_ROPE_NEOX, .n_rot = HD, .theta = 1e4f };
    float *x = cv_be_rows_alloc(be, ROWS * LD * sizeof(float));
    CHECK(x != NULL);
    for (size_t si = 0; si < CV_ARRAY_LEN(shapes) && x; si++)
        for (size_t ti = 0; ti < CV_ARRAY_LEN(types); ti++) {
            const uint32_t type = types[ti];
            kv_pool p = { .n_blocks = shapes[si].n_blocks, .n_layer = LAYERS, .n_head_kv = KV_HEADS, .head_dim = HD,
                          .n_parts = 2, .type = type, .qgroup = kv_q8_group(HD),
                          .elt_bytes = type == CV_GGML_Q8_0 ? 1 : type == CV_GGML_F16 ? 2 : 4,
                          .head_bytes = kv_head_bytes(HD, type),
                          .block_bytes = kv_block_bytes(LAYERS, 2, KV_HEADS, HD, type),
                          .run_shift = shapes[si].run_shift };
            const size_t bytes = kv_pool_bytes(&p);
            p.data = cv_be_rows_alloc(be, bytes);
            CHECK(p.data != NULL);
            if (!p.data)
                break;
            int32_t pos[ROWS] = { 5, 40 }, blk[ROWS] = { 0, p.n_blocks - 1 };
            const cv_batt_rows a = { .n_rows = ROWS, .qkv = x, .ld_qkv = LD, .n_head = HEADS, .n_head_kv = KV_HEADS,
                                     .head_dim = HD, .store_kv = true, .eps = 1e-6f, .rope = &rope, .pos = pos,
                                     .kv = &p, .kv_layer = 1, .kv_block = blk };
            keep(sizeof(cv_kv));
            cv_be_attn_rows(st, &a);
            keep(0);
            cv_kv d;
            memcpy(&d, kept(), sizeof d);
            CHECK_EQ_INT(cv_cuda_stream_error(st, &err), 0);
            int bad = 0;
            for (int32_t b = 0; b < p.n_blocks; b++)
                for (int32_t l = 0; l < LAYERS; l++)
                    for (int32_t g = 0; g < KV_HEADS; g++) {
                        const i64 k = cv_kv_k_at_block(&d, b, l, g), v = cv_kv_v_at_block(&d, b, l, g);
                        bad += (char *)d.data + k != (char *)kv_k(&p, b, l, g) ||
                               (char *)d.data + v != (char *)kv_v(&p, b, l, g);
                        bad += k < 0 || v < 0 || (size_t)k + p.head_bytes > bytes || (size_t)v + p.head_bytes > bytes;
                    }
            CHECK_MSG(bad == 0, "%s pool of %d blocks in runs of 2^%d: %d pieces the device addresses elsewhere than "
                      "the CPU", cv_dtype_get(type)->name, p.n_blocks, p.run_shift, bad);
            cv_be_rows_free(be, p.data);
        }
    cv_be_rows_free(be, x);
    cv_bstream_destroy(st);
}

TEST(device_memory_round_trips)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    char in[300], out[300] = { 0 };
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (char)(i * 7);
    void *a = NULL, *b = NULL;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_cuda_alloc(be, sizeof in, &a, &err), 0);
    CHECK_EQ_INT(cv_cuda_alloc(be, sizeof in, &b, &err), 0);
    CHECK_EQ_INT(cv_cuda_upload(be, a, in, sizeof in, &err), 0);
    CHECK_EQ_INT(cv_cuda_copy(be, b, a, sizeof in, &err), 0);
    CHECK_EQ_INT(cv_cuda_download(be, out, b, sizeof out, &err), 0);
    CHECK(!memcmp(in, out, sizeof in));
    cv_cuda_free(be, a);
    cv_cuda_free(be, b);
}

TEST(device_memory_runs_out_clearly)
{
    cv_backend *be = fake_backend();
    if (!be)
        return;
    cv_cuda_device_info di;
    cv_cuda_device_get(be, &di);
    const size_t used = di.total_bytes - di.free_bytes;
    char cap[32];
    snprintf(cap, sizeof cap, "%zu", used + ((size_t)1 << 20)); /* 1 MiB left */
    setenv("FAKE_CUDA_MEM", cap, 1);
    void *p = (void *)1;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_cuda_alloc(be, (size_t)3 << 20, &p, &err), CV_ENOMEM);
    CHECK(p == NULL);
    CHECK_MSG(strstr(err.msg, "cuda:0: out of memory: a buffer takes 3.0 MiB, 1.0 MiB free"), "%s", err.msg);
    /* a matmul whose activation scratch does not fit fails its stream with
     * the same words, and the stream works again once the error is read */
    cv_bstream *st;
    CHECK_EQ_INT(cv_bstream_create(be, 0, &st, &err), 0);
    uint8_t w[34 * 8 * 4] = { 0 };
    cv_bmat *m = NULL;
    CHECK_EQ_INT(cv_bmat_create(be, CV_GGML_Q8_0, 256, 4, w, sizeof w, &m, &err), 0);
    float *x = NULL, *y = NULL;
    CHECK_EQ_INT(cv_cuda_alloc(be, 256 * sizeof(float), (void **)&x, &err), 0);
    CHECK_EQ_INT(cv_cuda_alloc(be, 4 * 8192 * sizeof(float), (void **)&y, &err), 0);
    cv_be_matmul(st, m, 8192, x, 0, y, 4); /* 8192 rows of 8 blocks: 3 MiB of scratch */
    cv_err_clear(&err);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), CV_ENOMEM);
    CHECK_MSG(strstr(err.msg, "out of memory: the activation scratch takes"), "%s", err.msg);
    unsetenv("FAKE_CUDA_MEM");
    const int before = fake_launches();
    cv_be_matmul(st, m, 1, x, 256, y, 4);
    CHECK_EQ_INT(fake_launches() - before, 2);
    CHECK_EQ_INT(cv_cuda_stream_error(st, &err), 0);
    cv_bmat_destroy(be, m);
    cv_cuda_free(be, x);
    cv_cuda_free(be, y);
    cv_bstream_destroy(st);
}

TEST(describe_names_a_usable_device)
{
    setenv("CORVID_LIBCUDA", FAKE_CUDA_LIB, 1);
    setenv("CORVID_LIBNVRTC", FAKE_NVRTC_LIB, 1);
    setenv("FAKE_CUDA_MODE", "ok", 1);
    cv_buf out = { 0 };
    CHECK(cv_cuda_describe(&out, "cuda  "));
    CHECK_MSG(strstr(out.data, "cuda  driver " FAKE_CUDA_LIB ", CUDA 13.0") &&
                  strstr(out.data, "cuda  NVRTC 13.0 (" FAKE_NVRTC_LIB "), compiles for sm_75 to sm_120") &&
                  strstr(out.data, "cuda  cuda:0 Fake GPU, sm_90, 132 SMs, 1.0 GiB") &&
                  strstr(out.data, "usable, kernels built as cubins for sm_90"),
              "%s", out.data);
    cv_buf_free(&out);
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/cv_cuda_host_XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    char cache[PATH_MAX + 16];
    snprintf(cache, sizeof cache, "%s/backend", g_tmp);
    setenv("CORVID_CUDA_CACHE", cache, 1);
    RUN(driver_missing_says_so);
    RUN(driver_without_a_function_names_it);
    RUN(driver_states_from_cuinit);
    RUN(nvrtc_missing_says_so);
    RUN(backend_open_fails_clearly_and_cpu_remains);
    RUN(driver_older_than_nvrtc_is_refused);
    RUN(old_card_message_names_the_minimum);
    RUN(kernel_sources_are_embedded_as_they_are_on_disk);
    RUN(cache_key_changes_with_what_decides_the_image);
    RUN(cache_dir_follows_the_environment);
    RUN(describe_says_what_is_missing);
    RUN(doctor_says_what_cuda_this_machine_has);
    /* last: these open cuda:0 over the fakes, which then stays open */
    RUN(cache_misses_then_hits_and_prunes_stale_keys);
    RUN(backend_over_fake_driver_takes_every_weight_type);
    RUN(backend_refuses_what_it_cannot_hold);
    RUN(failed_launch_is_recorded_and_stops_the_stream);
    RUN(expert_matmul_groups_many_routes);
    RUN(row_operations_launch_once_each);
    RUN(kv_store_addresses_the_cpus_pool_layout);
    RUN(device_memory_round_trips);
    RUN(device_memory_runs_out_clearly);
    RUN(describe_names_a_usable_device);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_tmp);
    return test_report();
}
