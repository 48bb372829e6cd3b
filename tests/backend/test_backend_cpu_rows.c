/* test_backend_cpu_rows.c — the CPU backend's row operations and
 * activation memory. Each operation over every shape class (one row and
 * many, fewer rows than threads and more, rows narrower than a vector and
 * wider, strides wider than the rows, a gather map, a bias row, enough
 * values to wake the pool and too few) must give the bits of the kernels
 * layer's loop called row by row at the process level, with one thread and
 * with two, and stay within rounding of the scalar reference; values
 * outside the rows (the stride's gap) must stay untouched. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/kernels.h"
#include "test.h"

enum { GAP = 5 }; /* floats of stride beyond each row */

static const struct {
    int32_t n_rows;
    int64_t n;
} shapes[] = { { 1, 1 }, { 1, 7 }, { 3, 64 }, { 4, 33 }, { 17, 1000 }, { 1, 40000 }, { 9, 4099 }, { 64, 515 } };

typedef enum { RMSNORM, RMSNORM_GATHER, RMSNORM_NOW, ADD, BIAS, SCALE, SILU, GELU, SILU_CLAMPED, SIGMOID_MUL, SOFTCAP,
               N_OPS } op;
static const char *const names[N_OPS] = { "rmsnorm", "rmsnorm gathered", "rmsnorm without weight", "add",
                                          "bias", "scale", "swiglu", "geglu", "clamped swiglu", "sigmoid_mul",
                                          "softcap" };

static void fill(float *x, int64_t n, uint64_t seed)
{
    cv_rng r;
    cv_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = (cv_rng_f32(&r) * 2 - 1) * 4;
}

/* The operation on y (n_rows rows of n, ld apart) through the table. */
static void through_table(cv_bstream *s, op o, int32_t R, int64_t n, int64_t ld, float *y, const float *a,
                          const float *b, const float *w, const int32_t *gather)
{
    static const cv_bact acts[] = { { CV_BGLU_SILU, 0, 0 }, { CV_BGLU_GELU_TANH, 0, 0 },
                                    { CV_BGLU_SILU_CLAMPED, 1.702f, 7.0f } };
    switch (o) {
    case RMSNORM: cv_be_rmsnorm(s, R, n, a, ld, NULL, w, 1e-6f, y, ld); break;
    case RMSNORM_GATHER: cv_be_rmsnorm(s, R, n, a, ld, gather, w, 1e-6f, y, ld); break;
    case RMSNORM_NOW: cv_be_rmsnorm(s, R, n, a, ld, NULL, NULL, 1e-6f, y, ld); break;
    case ADD: cv_be_add(s, R, n, y, ld, a, ld, b, ld); break;
    case BIAS: cv_be_add(s, R, n, y, ld, a, ld, w, 0); break;
    case SCALE: cv_be_scale(s, R, n, y, ld, 0.37f); break;
    case SILU: case GELU: case SILU_CLAMPED: cv_be_glu(s, &acts[o - SILU], R, n, y, ld, a, ld, b, ld); break;
    case SIGMOID_MUL: cv_be_sigmoid_mul(s, R, n, y, ld, a, ld, b, ld); break;
    case SOFTCAP: cv_be_softcap(s, R, n, y, ld, 30.0f); break;
    default: break;
    }
}

/* The same, row by row through a level's loops (y starts as a copy of a
 * for the in-place operations). */
static void row_by_row(const cv_vec_ops *v, op o, int32_t R, int64_t n, int64_t ld, float *y, const float *a,
                       const float *b, const float *w, const int32_t *gather)
{
    for (int32_t t = 0; t < R; t++) {
        float *yt = y + t * ld;
        const float *at = a + t * ld, *bt = b + t * ld;
        switch (o) {
        case RMSNORM: v->rmsnorm(yt, at, w, n, 1e-6f); break;
        case RMSNORM_GATHER: v->rmsnorm(yt, a + gather[t] * ld, w, n, 1e-6f); break;
        case RMSNORM_NOW: v->rmsnorm(yt, at, NULL, n, 1e-6f); break;
        case ADD: v->add(yt, at, bt, n); break;
        case BIAS: v->add(yt, at, w, n); break;
        case SCALE: v->scale(yt, 0.37f, n); break;
        case SILU: v->swiglu(yt, at, bt, n); break;
        case GELU: v->geglu(yt, at, bt, n); break;
        case SILU_CLAMPED: v->swiglu_clamped(yt, at, bt, n, 1.702f, 7.0f); break;
        case SIGMOID_MUL: v->sigmoid_mul(yt, at, bt, n); break;
        case SOFTCAP:
            for (int64_t i = 0; i < n; i++)
                yt[i] = 30.0f * tanhf(yt[i] * (1.0f / 30.0f)); /* the engine's order: times 1/c */
            break;
        default: break;
        }
    }
}

static bool in_place(op o) { return o == SCALE || o == SOFTCAP; }

static void run_shape(cv_bstream *s, int threads, op o, int32_t R, int64_t n)
{
    const int64_t ld = n + GAP, total = (int64_t)R * ld;
    cv_backend *be = cv_backend_cpu();
    float *a = cv_be_rows_alloc(be, (size_t)total * sizeof(float)), *b = cv_be_rows_alloc(be, (size_t)total * sizeof(float));
    float *y = cv_be_rows_alloc(be, (size_t)total * sizeof(float));
    float *want = cv_xmalloc((size_t)total * sizeof(float)), *ref = cv_xmalloc((size_t)total * sizeof(float));
    float *host = cv_xmalloc((size_t)total * sizeof(float)), *w = cv_xmalloc((size_t)n * sizeof(float));
    float *host_a = cv_xmalloc((size_t)total * sizeof(float));
    int32_t *gather = cv_xmalloc((size_t)R * sizeof *gather);
    fill(host_a, total, 1);
    cv_be_upload(s, a, host_a, (size_t)total * sizeof(float));
    fill(host, total, 2);
    cv_be_upload(s, b, host, (size_t)total * sizeof(float));
    fill(w, n, 3);
    for (int32_t t = 0; t < R; t++)
        gather[t] = (t * 7 + 3) % R;
    /* y starts as a (the in-place operations) or as a marker */
    for (int64_t i = 0; i < total; i++)
        host[i] = in_place(o) ? host_a[i] : -12345.0f;
    cv_be_upload(s, y, host, (size_t)total * sizeof(float));
    memcpy(want, host, (size_t)total * sizeof(float));
    memcpy(ref, host, (size_t)total * sizeof(float));

    through_table(s, o, R, n, ld, y, a, b, w, gather);
    row_by_row(cv_vec_ops_for(cv_isa_active()), o, R, n, ld, want, a, b, w, gather);
    row_by_row(cv_vec_ops_for(CV_ISA_SCALAR), o, R, n, ld, ref, a, b, w, gather);
    cv_be_download(s, host, y, (size_t)total * sizeof(float));

    int64_t off_bits = -1, off_ref = -1;
    double worst = 0;
    for (int64_t i = 0; i < total; i++) {
        if (memcmp(&host[i], &want[i], sizeof(float)) && off_bits < 0)
            off_bits = i;
        const double d = fabs((double)host[i] - ref[i]) / (1.0 + fabs((double)ref[i]));
        worst = fmax(worst, d);
        if (d > 2e-5 && off_ref < 0)
            off_ref = i;
    }
    CHECK_MSG(off_bits < 0, "%s, %d rows of %lld, %d threads: value %lld (row %lld, col %lld) is %g, the loop row by "
              "row gives %g", names[o], R, (long long)n, threads, (long long)off_bits,
              (long long)(off_bits / ld), (long long)(off_bits % ld), off_bits < 0 ? 0 : host[off_bits],
              off_bits < 0 ? 0 : want[off_bits]);
    CHECK_MSG(off_ref < 0, "%s, %d rows of %lld: value %lld is %g, the scalar reference %g (worst relative %g)",
              names[o], R, (long long)n, (long long)off_ref, off_ref < 0 ? 0 : host[off_ref],
              off_ref < 0 ? 0 : ref[off_ref], worst);
    cv_be_rows_free(be, a);
    cv_be_rows_free(be, b);
    cv_be_rows_free(be, y);
    free(want);
    free(ref);
    free(host);
    free(host_a);
    free(w);
    free(gather);
}

TEST(every_row_operation_gives_the_loops_bits_at_every_shape_and_thread_count)
{
    printf("  row loops at %s\n", cv_isa_name(cv_vec_ops_level(cv_isa_active())));
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s;
        cv_err err = { 0 };
        CHECK_EQ_INT(cv_bstream_create(cv_backend_cpu(), threads, &s, &err), 0);
        if (!s)
            return;
        CHECK_EQ_INT(cv_bstream_threads(s), threads);
        for (int o = 0; o < N_OPS; o++)
            for (size_t i = 0; i < CV_ARRAY_LEN(shapes); i++)
                run_shape(s, threads, (op)o, shapes[i].n_rows, shapes[i].n);
        cv_bstream_sync(s);
        cv_bstream_destroy(s);
    }
}

int main(void)
{
    RUN(every_row_operation_gives_the_loops_bits_at_every_shape_and_thread_count);
    return test_report();
}
