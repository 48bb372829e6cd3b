/* test_kernels_dtypes.c — the dtype table, row by row: quantize ->
 * dequantize error within a stated bound per dtype, each dot product equal
 * to the float dot of its two dequantized operands (which pins scales,
 * mins, offsets and nibble order of the integer formula), every ISA's
 * functions equal to the scalar reference within a named tolerance on odd
 * sizes, the same on blocks of random bytes with extreme scales (what a
 * file may hold beyond what our quantizers write), half/bfloat conversions
 * exhaustively, and bad rows refused. */
#include <stdlib.h>

#include "kernels/kernels_int.h"
#include "random_blocks.h"
#include "test.h"

/* Relative RMS error bound of quantize->dequantize on N(0,1) data with 1%
 * outliers at 8 sigma (real weights have some), seeded. The bounds sit
 * about 25% above what the reference quantizers measure (CV_TEST_VERBOSE=1
 * prints them), so a change that costs precision trips them. */
static double roundtrip_bound(uint32_t type)
{
    switch (type) {
    case CV_GGML_F32: return 0;
    case CV_GGML_F16: return 2.2e-4;  /* measured 1.7e-4 */
    case CV_GGML_BF16: return 2.0e-3; /* 1.6e-3 */
    case CV_GGML_Q8_0: return 0.010;  /* 0.0079 */
    case CV_GGML_Q8_1: return 0.011;  /* 0.0086 */
    case CV_GGML_Q8_K: return 0.024;  /* 0.0194: one scale per 256 meets more outliers */
    case CV_GGML_Q6_K: return 0.030;  /* 0.0239 */
    case CV_GGML_Q5_0: return 0.090;  /* 0.0726 */
    case CV_GGML_Q5_1: return 0.059;  /* 0.0471 */
    case CV_GGML_Q5_K: return 0.056;  /* 0.0445 */
    case CV_GGML_Q4_0: return 0.172;  /* 0.1380 */
    case CV_GGML_Q4_1: return 0.126;  /* 0.1010 */
    case CV_GGML_Q4_K: return 0.115;  /* 0.0922 */
    case CV_GGML_Q3_K: return 0.254;  /* 0.2032 */
    case CV_GGML_Q2_K: return 0.381;  /* 0.3048 */
    case CV_GGML_IQ4_NL: return 0.139; /* 0.1115: the non-linear levels beat q4_0's 0.138 */
    case CV_GGML_IQ4_XS: return 0.133; /* 0.1067 */
    case CV_GGML_MXFP4: return 0.162; /* 0.1294: power-of-two scales */
    default: return -1;
    }
}

static void fill(float *x, int64_t n, uint64_t seed)
{
    cv_rng r;
    cv_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) {
        x[i] = cv_rng_normal(&r);
        if (cv_rng_below(&r, 100) == 0)
            x[i] *= 8;
    }
}

static size_t row_bytes(const cv_dtype *dt, int64_t n) { return (size_t)(n / dt->block_elems) * dt->block_bytes; }

/* Sizes: one block, a few odd block counts, and a long row. */
static const int64_t n_blocks_cases[] = { 1, 3, 7, 16 };

TEST(table_rows_are_consistent_and_indexed_by_their_type_id)
{
    int rows = 0;
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt)
            continue;
        rows++;
        CHECK_EQ_INT(dt->type, t);
        CHECK(dt->block_elems > 0 && dt->block_bytes > 0);
        CHECK(dt->ops[CV_ISA_SCALAR].to_f32 && dt->ops[CV_ISA_SCALAR].from_f32);
        const cv_dtype *act = cv_dtype_get(dt->vec_dot_type);
        CHECK_MSG(act != NULL, "%s: activation type %u not in the table", dt->name, dt->vec_dot_type);
        if (dt->is_weight) {
            CHECK_MSG(dt->ops[CV_ISA_SCALAR].vec_dot != NULL, "%s: weight type without a dot", dt->name);
            CHECK_MSG(act && (act->block_elems == dt->block_elems || dt->block_elems == 1),
                      "%s: activation blocks do not line up", dt->name);
        }
        CHECK_MSG(roundtrip_bound(t) >= 0, "%s has no round-trip bound in this test", dt->name);
    }
    /* f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K iq4_nl
     * iq4_xs mxfp4 + q8_1 q8_K */
    CHECK_EQ_INT(rows, 18);
    CHECK(cv_dtype_get(16) == NULL); /* iq2_xxs: known to GGUF, not computed */
    CHECK(cv_dtype_get(CV_GGML_I8) == NULL);
    CHECK(cv_dtype_get(100000) == NULL);
}

TEST(quantize_then_dequantize_stays_within_each_dtypes_error_bound)
{
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt)
            continue;
        const int64_t n = 16 * 256;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        void *q = malloc(row_bytes(dt, n));
        fill(x, n, 1000 + t);
        CHECK_EQ_INT(cv_quantize_row(t, x, q, n, NULL), 0);
        CHECK_EQ_INT(cv_dequantize_row(t, q, y, n, NULL), 0);
        double e2 = 0, x2 = 0;
        for (int64_t i = 0; i < n; i++) {
            e2 += (double)(x[i] - y[i]) * (x[i] - y[i]);
            x2 += (double)x[i] * x[i];
        }
        double rel = sqrt(e2 / x2);
        if (getenv("CV_TEST_VERBOSE"))
            printf("  %-5s relative rms error %.5f (bound %.5f)\n", dt->name, rel, roundtrip_bound(t));
        CHECK_MSG(rel <= roundtrip_bound(t), "%s: relative rms error %.5f above its bound %.5f", dt->name, rel,
                  roundtrip_bound(t));
        /* A quantizer that wrote nothing would pass a loose bound on zeros:
         * make sure the data had energy and was actually encoded. */
        CHECK_MSG(t == CV_GGML_F32 || rel > 0, "%s: exact round trip is suspicious for a lossy type", dt->name);
        free(x);
        free(y);
        free(q);
    }
}

TEST(quantizers_map_all_zero_and_constant_blocks_without_nans)
{
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt)
            continue;
        const int64_t n = 2 * 256;
        float *x = calloc(n, sizeof *x), *y = malloc(n * sizeof *y);
        void *q = malloc(row_bytes(dt, n));
        for (int64_t i = 256; i < n; i++)
            x[i] = 0.375f; /* second half constant and positive */
        dt->ops[CV_ISA_SCALAR].from_f32(x, q, n);
        dt->ops[CV_ISA_SCALAR].to_f32(q, y, n);
        for (int64_t i = 0; i < n; i++) {
            CHECK_MSG(isfinite(y[i]), "%s: value %lld is not finite", dt->name, (long long)i);
            CHECK_MSG(fabsf(y[i] - x[i]) <= 0.375f * 0.07f, "%s: value %lld = %g, expected %g", dt->name,
                      (long long)i, y[i], x[i]);
            if (fabsf(y[i] - x[i]) > 0.375f * 0.07f)
                break;
        }
        free(x);
        free(y);
        free(q);
    }
}

/* Float dot of the dequantized weight row with the dequantized activation
 * row: what the integer dot must equal up to f32 rounding. */
static double dequant_dot(const cv_dtype *dt, const cv_dtype *act, const void *w, const void *a, int64_t n,
                          double *mag)
{
    float *fw = malloc(n * sizeof *fw), *fa = malloc(n * sizeof *fa);
    dt->ops[CV_ISA_SCALAR].to_f32(w, fw, n);
    act->ops[CV_ISA_SCALAR].to_f32(a, fa, n);
    /* q8_1's stored sum s = d * sum(q) is rounded to f16, and the
     * q4_1/q5_1 dots use it for the offset term (the format's design): so
     * split each weight into (value - m) and m, and take m * s. */
    float *mb = calloc(n / 32 + 1, sizeof *mb), *sb = calloc(n / 32 + 1, sizeof *sb);
    if (act->type == CV_GGML_Q8_1)
        for (int64_t b = 0; b < n / 32; b++) {
            mb[b] = cv_fp16_to_fp32(dt->type == CV_GGML_Q4_1 ? ((const block_q4_1 *)w)[b].m : ((const block_q5_1 *)w)[b].m);
            sb[b] = cv_fp16_to_fp32(((const block_q8_1 *)a)[b].s);
        }
    double s = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        s += ((double)fw[i] - mb[i / 32]) * fa[i];
        m += fabs((double)fw[i] * fa[i]);
    }
    for (int64_t b = 0; b < n / 32; b++)
        s += (double)mb[b] * sb[b];
    free(mb);
    free(sb);
    free(fw);
    free(fa);
    *mag = m;
    return s;
}

TEST(every_dot_equals_the_float_dot_of_its_dequantized_operands)
{
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt || !dt->is_weight)
            continue;
        const cv_dtype *act = cv_dtype_get(dt->vec_dot_type);
        for (size_t c = 0; c < CV_ARRAY_LEN(n_blocks_cases); c++) {
            const int64_t n = n_blocks_cases[c] * (dt->block_elems == 1 ? 37 : dt->block_elems);
            float *x = malloc(n * sizeof *x), *xa = malloc(n * sizeof *xa);
            void *w = malloc(row_bytes(dt, n)), *a = malloc(row_bytes(act, n));
            fill(x, n, 7 * t + c);
            fill(xa, n, 9000 + 7 * t + c);
            dt->ops[CV_ISA_SCALAR].from_f32(x, w, n);
            act->ops[CV_ISA_SCALAR].from_f32(xa, a, n);
            double mag, ref = dequant_dot(dt, act, w, a, n, &mag);
            for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
                if (!cv_isa_supported(isa))
                    continue;
                float got;
                cv_dtype_ops_for(dt, isa).vec_dot(n, w, a, &got);
                /* f32 accumulation over n products, scales multiplied in
                 * a different order: a few ulps of the magnitude sum. */
                CHECK_MSG(fabs(got - ref) <= 2e-6 * mag + 1e-6, "%s %s n=%lld: dot %.7g, dequantized dot %.7g (mag %g)",
                          dt->name, cv_isa_name(isa), (long long)n, got, ref, mag);
            }
            free(x);
            free(xa);
            free(w);
            free(a);
        }
    }
}

TEST(every_isa_dequantizes_bit_for_bit_like_the_reference)
{
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt)
            continue;
        for (size_t c = 0; c < CV_ARRAY_LEN(n_blocks_cases); c++) {
            const int64_t n = n_blocks_cases[c] * (dt->block_elems == 1 ? 41 : dt->block_elems);
            float *x = malloc(n * sizeof *x), *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1);
            /* Random bytes, not quantizer output: every bit pattern of
             * levels and scales is fair game for a file (NaN/inf scales
             * excepted, so compare with memcmp semantics anyway). */
            uint8_t *q = malloc(row_bytes(dt, n));
            cv_rng r;
            cv_rng_seed(&r, 77 + t + c);
            fill(x, n, 31 + t);
            dt->ops[CV_ISA_SCALAR].from_f32(x, q, n);
            dt->ops[CV_ISA_SCALAR].to_f32(q, y0, n);
            for (int isa = 1; isa < CV_ISA_COUNT; isa++) {
                if (!cv_isa_supported(isa))
                    continue;
                memset(y1, 0xAB, n * sizeof *y1);
                cv_dtype_ops_for(dt, isa).to_f32(q, y1, n);
                CHECK_MSG(!memcmp(y0, y1, n * sizeof *y0), "%s %s n=%lld: dequantized values differ from the reference",
                          dt->name, cv_isa_name(isa), (long long)n);
            }
            free(x);
            free(y0);
            free(y1);
            free(q);
        }
    }
}

TEST(every_isa_dequantizes_and_dots_random_blocks_like_the_reference)
{
    /* Random bytes with scales in every regime (zero, subnormal, ordinary,
     * the largest half floats; mxfp4 exponents 0..255): dequantize must be
     * bit-for-bit the reference's, and every dot must equal the float dot of
     * its dequantized operands, whatever the levels. */
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt || !dt->is_weight || !dt->is_quantized)
            continue;
        const cv_dtype *act = cv_dtype_get(dt->vec_dot_type);
        for (size_t c = 0; c < CV_ARRAY_LEN(n_blocks_cases); c++) {
            const int64_t nb = n_blocks_cases[c], n = nb * dt->block_elems;
            uint8_t *w = malloc(row_bytes(dt, n)), *a = malloc(row_bytes(act, n));
            float *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1), *xa = malloc(n * sizeof *xa);
            cv_rng r;
            cv_rng_seed(&r, 4242 + 31 * t + c);
            random_blocks(t, w, nb, &r, false);
            dt->ops[CV_ISA_SCALAR].to_f32(w, y0, n);
            for (int isa = 1; isa < CV_ISA_COUNT; isa++) {
                if (!cv_isa_supported(isa))
                    continue;
                memset(y1, 0xAB, n * sizeof *y1);
                cv_dtype_ops_for(dt, isa).to_f32(w, y1, n);
                CHECK_MSG(!memcmp(y0, y1, n * sizeof *y0), "%s %s n=%lld: random blocks dequantize differently",
                          dt->name, cv_isa_name(isa), (long long)n);
            }
            random_blocks(t, w, nb, &r, true);
            /* activations over six orders of magnitude */
            const float scale = powf(10.f, (float)cv_rng_below(&r, 7) - 3.f);
            fill(xa, n, 800 + t + c);
            for (int64_t i = 0; i < n; i++)
                xa[i] *= scale;
            act->ops[CV_ISA_SCALAR].from_f32(xa, a, n);
            double mag, ref = dequant_dot(dt, act, w, a, n, &mag);
            for (int isa = 0; isa < CV_ISA_COUNT; isa++) {
                if (!cv_isa_supported(isa))
                    continue;
                float got;
                cv_dtype_ops_for(dt, isa).vec_dot(n, w, a, &got);
                CHECK_MSG(fabs(got - ref) <= 2e-6 * mag, "%s %s n=%lld: dot %.7g, dequantized dot %.7g (mag %g)",
                          dt->name, cv_isa_name(isa), (long long)n, got, ref, mag);
            }
            free(w);
            free(a);
            free(y0);
            free(y1);
            free(xa);
        }
    }
}

TEST(every_isa_quantizes_like_the_reference_up_to_rounding_ties)
{
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt)
            continue;
        const int64_t n = 9 * (dt->block_elems == 1 ? 41 : dt->block_elems);
        float *x = malloc(n * sizeof *x), *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1);
        void *q0 = malloc(row_bytes(dt, n)), *q1 = malloc(row_bytes(dt, n));
        fill(x, n, 555 + t);
        dt->ops[CV_ISA_SCALAR].from_f32(x, q0, n);
        dt->ops[CV_ISA_SCALAR].to_f32(q0, y0, n);
        for (int isa = 1; isa < CV_ISA_COUNT; isa++) {
            if (!cv_isa_supported(isa))
                continue;
            cv_dtype_ops_for(dt, isa).from_f32(x, q1, n);
            cv_dtype_ops_for(dt, isa).to_f32(q1, y1, n);
            /* A tie (x * id exactly k + 0.5) may round either way; random
             * data has almost none. Allow one level on 0.1% of values. */
            int64_t differ = 0;
            for (int64_t i = 0; i < n; i++)
                if (y0[i] != y1[i])
                    differ++;
            CHECK_MSG(differ <= n / 1000, "%s %s: %lld of %lld values quantize differently from the reference", dt->name,
                      cv_isa_name(isa), (long long)differ, (long long)n);
        }
        free(x);
        free(y0);
        free(y1);
        free(q0);
        free(q1);
    }
}

TEST(q8_K_rows_are_the_references_bytes_at_every_isa)
{
    /* q8_K (the K-quants' activation rows, act256 in the tiles) has no
     * tie slack: levels, scale and sums of each 16 are the reference's
     * bytes. Super-blocks: random with outliers; all zero; +-amax both
     * present, the negative first (its sign is d's); amax at the last
     * value; exact rounding ties (scale 1: x.5 rounds to even). */
    const cv_dtype *dt = cv_dtype_get(CV_GGML_Q8_K);
    const int64_t n = 6 * QK_K;
    float *x = malloc(n * sizeof *x);
    block_q8_K *q0 = malloc(6 * sizeof *q0), *q1 = malloc(6 * sizeof *q1);
    fill(x, n, 909);
    memset(x + QK_K, 0, QK_K * sizeof *x);
    x[2 * QK_K + 37] = -500;
    x[2 * QK_K + 100] = 500;
    x[3 * QK_K + QK_K - 1] = -400;
    for (int i = 0; i < QK_K; i++)
        x[4 * QK_K + i] = (float)(i % 64) - 31.5f;
    x[4 * QK_K + 3] = -127;
    int isas = 0;
    for (int isa = 1; isa < CV_ISA_COUNT; isa++) {
        if (!cv_isa_supported(isa)) {
            printf("  %s: not on this CPU (%s)\n", cv_isa_name(isa), cv_isa_missing(isa));
            continue;
        }
        isas++;
        dt->ops[CV_ISA_SCALAR].from_f32(x, q0, n);
        cv_dtype_ops_for(dt, isa).from_f32(x, q1, n);
        for (int b = 0; b < 6; b++)
            CHECK_MSG(!memcmp(&q0[b], &q1[b], sizeof q0[b]), "%s: super-block %d differs from the reference",
                      cv_isa_name(isa), b);
    }
    CHECK(!cv_isa_supported(CV_ISA_AVX2) || isas > 0);
    CHECK(q0[2].d > 0 && q0[3].d > 0); /* the negative extreme went to +127 */
    free(x);
    free(q0);
    free(q1);
}

TEST(half_floats_round_trip_exactly_for_every_bit_pattern)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = cv_fp16_to_fp32((uint16_t)h);
        uint16_t back = cv_fp32_to_fp16(f);
        bool nan = ((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF);
        if (nan ? !isnan(f) || ((back >> 10) & 0x1F) != 0x1F || !(back & 0x3FF) : back != h)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(cv_fp16_to_fp32(0x3C00) == 1.0f);
    CHECK(cv_fp16_to_fp32(0x0001) == 0x1p-24f);
    CHECK(cv_fp16_to_fp32(0x7BFF) == 65504.0f);
    CHECK(cv_fp32_to_fp16(65519.0f) == 0x7BFF);
    CHECK(cv_fp32_to_fp16(65520.0f) == 0x7C00);        /* ties to even: overflows */
    CHECK(cv_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3C00); /* tie to even, down */
    CHECK(cv_fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02);
    CHECK(cv_fp32_to_fp16(0x1p-25f) == 0x0000);        /* tie: to even zero */
    CHECK(cv_fp32_to_fp16(0x1.8p-25f) == 0x0001);
    CHECK(cv_fp32_to_fp16(-0.0f) == 0x8000);
    CHECK(cv_fp32_to_fp16(1e-10f) == 0);
}

TEST(bfloat16_rounds_to_nearest_even_and_keeps_nans)
{
    CHECK(cv_fp32_to_bf16(1.0f) == 0x3F80);
    CHECK(cv_bf16_to_fp32(0x3F80) == 1.0f);
    float f;
    uint32_t u = 0x3F808000u; /* 1 + 2^-8: exact tie, rounds to even (down) */
    memcpy(&f, &u, 4);
    CHECK(cv_fp32_to_bf16(f) == 0x3F80);
    u = 0x3F818000u; /* odd: tie rounds up */
    memcpy(&f, &u, 4);
    CHECK(cv_fp32_to_bf16(f) == 0x3F82);
    CHECK(isnan(cv_bf16_to_fp32(cv_fp32_to_bf16(NAN))));
    u = 0x7F800001u; /* signalling NaN with only a low payload bit */
    memcpy(&f, &u, 4);
    CHECK(isnan(cv_bf16_to_fp32(cv_fp32_to_bf16(f))));
    CHECK(cv_bf16_to_fp32(cv_fp32_to_bf16(INFINITY)) == INFINITY);
}

TEST(dequantize_row_accepts_misaligned_rows)
{
    /* 3 rows of q6_K (210 bytes each, so rows 1 and 2 sit at odd
     * addresses) + the 1-byte shift of the whole buffer. */
    float x[3 * 256], y0[256], y1[256];
    fill(x, 3 * 256, 4);
    uint8_t *buf = malloc(3 * 210 + 1), *q = buf + 1;
    CHECK_EQ_INT(cv_quantize_row(CV_GGML_Q6_K, x, q, 3 * 256, NULL), 0);
    uint8_t aligned[210] __attribute__((aligned(8)));
    for (int r = 0; r < 3; r++) {
        memcpy(aligned, q + 210 * r, 210);
        cv_dtype_get(CV_GGML_Q6_K)->ops[CV_ISA_SCALAR].to_f32(aligned, y0, 256);
        CHECK_EQ_INT(cv_dequantize_row(CV_GGML_Q6_K, q + 210 * r, y1, 256, NULL), 0);
        CHECK(!memcmp(y0, y1, sizeof y0));
    }
    free(buf);
}

TEST(bad_rows_are_refused_with_a_message)
{
    cv_err err = { 0 };
    float x[64] = { 0 }, y[64];
    uint8_t q[64] = { 0 };
    CHECK_EQ_INT(cv_dequantize_row(16, q, y, 256, &err), CV_EUNSUPPORTED);
    CHECK(strstr(err.msg, "type 16") != NULL);
    cv_err_clear(&err);
    CHECK_EQ_INT(cv_dequantize_row(CV_GGML_Q4_0, q, y, 33, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "33") && strstr(err.msg, "q4_0"));
    CHECK_EQ_INT(cv_quantize_row(CV_GGML_Q4_K, x, q, 64, NULL), CV_EINVAL);
    CHECK_EQ_INT(cv_quantize_row(12345, x, q, 64, NULL), CV_EUNSUPPORTED);
    CHECK_EQ_INT(cv_dequantize_row(CV_GGML_F32, x, y, -1, NULL), CV_EINVAL);
}

int main(void)
{
    RUN(table_rows_are_consistent_and_indexed_by_their_type_id);
    RUN(quantize_then_dequantize_stays_within_each_dtypes_error_bound);
    RUN(quantizers_map_all_zero_and_constant_blocks_without_nans);
    RUN(every_dot_equals_the_float_dot_of_its_dequantized_operands);
    RUN(every_isa_dequantizes_bit_for_bit_like_the_reference);
    RUN(every_isa_dequantizes_and_dots_random_blocks_like_the_reference);
    RUN(every_isa_quantizes_like_the_reference_up_to_rounding_ties);
    RUN(q8_K_rows_are_the_references_bytes_at_every_isa);
    RUN(half_floats_round_trip_exactly_for_every_bit_pattern);
    RUN(bfloat16_rounds_to_nearest_even_and_keeps_nans);
    RUN(dequantize_row_accepts_misaligned_rows);
    RUN(bad_rows_are_refused_with_a_message);
    return test_report();
}
