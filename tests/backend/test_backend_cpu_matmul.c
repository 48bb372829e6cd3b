/* test_backend_cpu_matmul.c — the CPU stream's matmul scratch. After
 * stream_reserve for a model's matrices and a batch, the stream's quantized
 * activation rows are resident (a first request writes no fresh page), a
 * matmul within the batch uses them as they are, a larger one grows them,
 * and every product has the bits of the kernels layer's own
 * cv_matmul_strided, with one thread and with two. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu_int.h"
#include "gguf/gguf.h"
#include "test.h"

static void fill(float *x, int64_t n, uint64_t seed)
{
    cv_rng r;
    cv_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = cv_rng_f32(&r) * 2 - 1;
}

/* Bytes of [p, p + n) not resident. */
static size_t absent_bytes(const void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)p & ~(page - 1),
                    hi = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    const size_t n_vec = (hi - lo) / page;
    unsigned char *vec = cv_xmalloc(n_vec);
    size_t absent = 0;
    if (mincore((void *)lo, hi - lo, vec) != 0)
        absent = n;
    else
        for (size_t i = 0; i < n_vec; i++)
            absent += (vec[i] & 1) ? 0 : page;
    free(vec);
    return absent;
}

/* A q8_0 and an f16 matrix (quantized rows and f32 rows), y = W x through
 * the stream against the kernels' own call. */
TEST(the_reserved_scratch_is_resident_used_as_is_and_gives_the_kernels_bits)
{
    enum { N_IN = 1024, N_OUT = 96, MAX_TOK = 64, BIG = 150 };
    const uint32_t types[2] = { CV_GGML_Q8_0, CV_GGML_F16 };
    float *wf = cv_xmalloc((size_t)N_IN * N_OUT * sizeof *wf), *x = cv_xmalloc((size_t)BIG * N_IN * sizeof *x);
    float *y0 = cv_xmalloc((size_t)BIG * N_OUT * sizeof *y0), *y1 = cv_xmalloc((size_t)BIG * N_OUT * sizeof *y1);
    fill(wf, (int64_t)N_IN * N_OUT, 1);
    fill(x, (int64_t)BIG * N_IN, 2);
    cv_backend *be = cv_backend_cpu();
    cv_bmat *m[2];
    char *data[2];
    for (int k = 0; k < 2; k++) {
        const size_t row = cv_ggml_row_bytes(types[k], N_IN);
        data[k] = cv_xmalloc(row * N_OUT);
        for (int o = 0; o < N_OUT; o++)
            CHECK_EQ_INT(cv_quantize_row(types[k], wf + (size_t)o * N_IN, data[k] + o * row, N_IN, NULL), 0);
        CHECK_EQ_INT(cv_bmat_create(be, types[k], N_IN, N_OUT, data[k], row * N_OUT, &m[k], NULL), 0);
    }
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s = NULL;
        CHECK_EQ_INT(cv_bstream_create(be, threads, &s, NULL), 0);
        cpu_stream *st = cpu_stream_of(s);
        cv_bstream_reserve(s, (const cv_bmat *const *)m, 2, MAX_TOK);
        size_t want = 0;
        for (int k = 0; k < 2; k++)
            want = CV_MAX(want, cv_wmat_act_bytes(cpu_wmat(m[k]), MAX_TOK));
        CHECK_MSG(st->act_bytes >= want, "reserved %zu bytes of scratch, the widest matrix takes %zu", st->act_bytes,
                  want);
        CHECK_MSG(absent_bytes(st->act, st->act_bytes) == 0, "%zu of the %zu reserved bytes are not resident",
                  absent_bytes(st->act, st->act_bytes), st->act_bytes);
        const void *act = st->act;
        const int64_t toks[3] = { 1, MAX_TOK, BIG };
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 3; i++) {
                const int64_t n = toks[i];
                memset(y0, 0, (size_t)n * N_OUT * sizeof *y0);
                memset(y1, 0xff, (size_t)n * N_OUT * sizeof *y1);
                cv_be_matmul(s, m[k], n, x, N_IN, y1, N_OUT);
                cv_matmul_strided(cv_bstream_cpu_pool(s), cpu_wmat(m[k]), n, x, N_IN, y0, N_OUT);
                CHECK_MSG(memcmp(y0, y1, (size_t)n * N_OUT * sizeof *y0) == 0,
                          "%d thread(s), type %u, %lld rows: the stream's product differs from the kernels'", threads,
                          types[k], (long long)n);
                if (n <= MAX_TOK)
                    CHECK_MSG(st->act == act, "a matmul of %lld rows within the reserve of %d moved the scratch",
                              (long long)n, MAX_TOK);
            }
        CHECK_MSG(st->act_bytes >= want / MAX_TOK * BIG, "a matmul of %d rows did not grow the scratch", BIG);
        cv_bstream_destroy(s);
    }
    for (int k = 0; k < 2; k++) {
        cv_bmat_destroy(be, m[k]);
        free(data[k]);
    }
    free(wf);
    free(x);
    free(y0);
    free(y1);
}

int main(void)
{
    RUN(the_reserved_scratch_is_resident_used_as_is_and_gives_the_kernels_bits);
    return test_report();
}
