/* test_cuda_nvrtc — the kernels through the NVRTC corvid loads at run
 * time, where this machine has one (no GPU needed): every embedded
 * program compiles, for every weight type, to a cubin for sm_90 and for
 * the oldest architecture this NVRTC and corvid share, and to PTX; the
 * disk cache misses, hits and prunes; and the backend's host side over the
 * fake driver (tests/backend/fake_cuda.c: memory in RAM, launches counted)
 * uploads every weight type, finds every kernel it launches in the
 * compiled images, reports out-of-memory and failed launches. Without
 * NVRTC it prints "nvrtc: not on this machine", which CTest reports as a
 * skip (tests/backend/CMakeLists.txt), in CI too: CI has no CUDA. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/cuda/cuda_int.h"
#include "kernels/kernels.h"
#include "test.h"

static cv_cuda_nvrtc g_rtc;
static char g_tmp[PATH_MAX];

/* The weight types the CPU computes with: the GPU must take each. */
static int weight_types(uint32_t *out)
{
    int n = 0;
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (dt && dt->is_weight)
            out[n++] = t;
    }
    return n;
}

static bool nvrtc_knows(int sm)
{
    for (int i = 0; i < g_rtc.n_archs; i++)
        if (g_rtc.archs[i] == sm)
            return true;
    return false;
}

static void compile_all_for(int sm, bool ptx)
{
    const cv_cuda_target t = { .sm = sm, .ptx = ptx };
    uint32_t types[CV_GGML_TYPE_COUNT];
    const int n = weight_types(types);
    cv_buf image = { 0 };
    cv_err err = { 0 };
    for (int i = -1; i < n; i++) {
        char defines[32] = "";
        if (i >= 0)
            snprintf(defines, sizeof defines, "-DCV_WTYPE=%u", types[i]);
        const char *src = i < 0 ? "act.cu" : "mm.cu";
        cv_err_clear(&err);
        const int rc = cv_cuda_rtc_compile(&g_rtc, &t, src, defines, &image, &err);
        CHECK_MSG(rc == 0, "%s %s for %s_%d: %s", src, defines, ptx ? "compute" : "sm", sm, err.msg);
        if (rc)
            continue;
        if (ptx)
            CHECK_MSG(strstr(image.data, ".entry") && strstr(image.data, ".target"), "%s %s: not PTX", src, defines);
        else
            CHECK_MSG(image.len > 64 && !memcmp(image.data, "\x7f" "ELF", 4), "%s %s: not a cubin", src, defines);
    }
    cv_buf_free(&image);
}

TEST(every_program_compiles_for_sm_90)
{
    if (!nvrtc_knows(90))
        TEST_SKIP("NVRTC %d.%d does not compile for sm_90", g_rtc.major, g_rtc.minor);
    compile_all_for(90, false);
}

TEST(every_program_compiles_for_the_oldest_shared_arch)
{
    int old = 0;
    for (int i = 0; i < g_rtc.n_archs && !old; i++)
        if (g_rtc.archs[i] >= CV_CUDA_MIN_SM)
            old = g_rtc.archs[i];
    CHECK(old > 0);
    printf("     oldest architecture: sm_%d\n", old);
    compile_all_for(old, false);
}

TEST(every_program_compiles_to_ptx)
{
    compile_all_for(g_rtc.archs[g_rtc.n_archs - 1], true);
}

TEST(a_broken_program_reports_nvrtc_log)
{
    const cv_cuda_target t = { .sm = g_rtc.archs[g_rtc.n_archs - 1] };
    cv_buf image = { 0 };
    cv_err err = { 0 };
    /* mm.cu refuses to compile without its weight type */
    CHECK_EQ_INT(cv_cuda_rtc_compile(&g_rtc, &t, "mm.cu", "", &image, &err), CV_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "cannot compile mm.cu") && strstr(err.msg, "CV_WTYPE"), "%s", err.msg);
    cv_err_clear(&err);
    CHECK_EQ_INT(cv_cuda_rtc_compile(&g_rtc, &t, "common.cuh", "", &image, &err), CV_EINVAL);
    CHECK_EQ_INT(cv_cuda_rtc_compile(&g_rtc, &t, "nope.cu", "", &image, &err), CV_EINVAL);
    cv_buf_free(&image);
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
    const cv_cuda_target t = { .sm = g_rtc.archs[g_rtc.n_archs - 1] };
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/cache", g_tmp);
    cv_buf a = { 0 }, b = { 0 };
    bool hit = true;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_cuda_rtc_get(&g_rtc, &t, dir, "act.cu", "", &a, &hit, &err), 0);
    CHECK(!hit);
    CHECK_EQ_INT(count_files(dir, "act.cu-"), 1);
    CHECK_EQ_INT(cv_cuda_rtc_get(&g_rtc, &t, dir, "act.cu", "", &b, &hit, &err), 0);
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
    CHECK_EQ_INT(cv_cuda_rtc_get(&g_rtc, &t, dir, "act.cu", "", &b, &hit, &err), 0);
    CHECK(!hit);
    CHECK_EQ_INT(count_files(dir, "act.cu-"), 1);
    CHECK(access(stale, F_OK) != 0);
    CHECK(access(keep, F_OK) == 0); /* another program's file stays */
    /* no directory: compiled, not cached */
    CHECK_EQ_INT(cv_cuda_rtc_get(&g_rtc, &t, "", "act.cu", "", &b, &hit, &err), 0);
    CHECK(!hit && b.len > 0);
    cv_buf_free(&a);
    cv_buf_free(&b);
}

/* ---- the backend over the fake driver ---- */

static int (*fake_launches)(void);

static cv_backend *fake_backend(void)
{
    setenv("CORVID_LIBCUDA", FAKE_CUDA_LIB, 1);
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
    cv_cuda_device_info di;
    cv_cuda_device_get(be, &di);
    CHECK_EQ_STR(di.name, "Fake GPU");
    CHECK_EQ_INT(di.sm, 90);
    CHECK_EQ_INT(di.n_sm, 132);
    cv_bstream *st;
    cv_err err = { 0 };
    CHECK_MSG(cv_bstream_create(be, 0, &st, &err) == 0, "%s", err.msg);
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

int main(void)
{
    cv_err err = { 0 };
    if (cv_cuda_nvrtc_open(NULL, &g_rtc, &err)) {
        printf("nvrtc: not on this machine (%s)\n", err.msg);
        return 0;
    }
    printf("NVRTC %d.%d at %s, sm_%d to sm_%d\n", g_rtc.major, g_rtc.minor, g_rtc.path, g_rtc.archs[0],
           g_rtc.archs[g_rtc.n_archs - 1]);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/cv_cuda_nvrtc_XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    char cache[PATH_MAX + 16];
    snprintf(cache, sizeof cache, "%s/backend", g_tmp);
    setenv("CORVID_CUDA_CACHE", cache, 1);
    RUN(every_program_compiles_for_sm_90);
    RUN(every_program_compiles_for_the_oldest_shared_arch);
    RUN(every_program_compiles_to_ptx);
    RUN(a_broken_program_reports_nvrtc_log);
    RUN(cache_misses_then_hits_and_prunes_stale_keys);
    RUN(backend_over_fake_driver_takes_every_weight_type);
    RUN(backend_refuses_what_it_cannot_hold);
    RUN(failed_launch_is_recorded_and_stops_the_stream);
    RUN(expert_matmul_groups_many_routes);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_tmp);
    cv_cuda_nvrtc_close(&g_rtc);
    return test_report();
}
