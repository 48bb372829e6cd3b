/* kernels_int.h — the kernels layer's guts, shared by its files only: the
 * GGUF block layouts (bit-exact with ggml's, each size pinned by a
 * static_assert), scalar helpers (half floats, rounding), the per-dtype
 * entry points the table in dtypes.c is built from, and the interface
 * between the matmul drivers (matmul.c, matmul_experts.c) and each dtype's
 * tiles.
 *
 * Block layouts (all little-endian; `f16` is an IEEE half; QK_K = 256):
 *   q4_0  f16 d | u8 qs[16]            x[j] = (lo(qs[j]) - 8) d, x[j+16] = (hi(qs[j]) - 8) d
 *   q4_1  f16 d, m | u8 qs[16]         x = q d + m (nibbles as q4_0)
 *   q5_0  f16 d | u8 qh[4] | u8 qs[16] 5th bit of x[j] is bit j of qh (j < 32); x = (q - 16) d
 *   q5_1  f16 d, m | u8 qh[4] | qs[16] x = q d + m
 *   q8_0  f16 d | i8 qs[32]            x = q d
 *   q8_1  f16 d, s | i8 qs[32]         s = d * sum(qs) (activation type)
 *   q4_K  f16 d, dmin | u8 scales[12] | u8 qs[128]
 *         8 sub-blocks of 32 with 6-bit scale sc and min m (packed, see
 *         k_scale_min); each 64 values share 32 bytes: sub-block 2c in the
 *         low nibbles, 2c+1 in the high ones; x = d sc q - dmin m
 *   q5_K  f16 d, dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]
 *         as q4_K, plus bit 4 of value l of sub-block j is bit j of qh[l]
 *   q6_K  u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
 *         16 sub-blocks of 16 with int8 scales; x = d sc (q - 32), q 6 bits:
 *         per 128 values, ql[l] holds l (lo) and l+64 (hi), ql[l+32] holds
 *         l+32 and l+96, qh[l] bits 0-1/2-3/4-5/6-7 are bits 4-5 of l,
 *         l+32, l+64, l+96
 *   q8_K  f32 d | i8 qs[256] | i16 bsums[16] (sum of each 16; activation type)
 *   q2_K  u8 scales[16] | u8 qs[64] | f16 d, dmin
 *         16 sub-blocks of 16; scales[j] = sc (low nibble) | m (high);
 *         x = d sc q - dmin m with 2-bit q: per 128 values, qs[l] (l < 32)
 *         holds bits 2s..2s+1 = value 32s + l (s = 0..3), so value 32s + l
 *         is in sub-block 2s + l/16
 *   q3_K  u8 hmask[32] | u8 qs[64] | u8 scales[12] | f16 d
 *         16 sub-blocks of 16; low 2 bits of q as q2_K's qs; bit k of
 *         hmask[l] is bit 2 of value 32k + l; x = d (sc - 32) (q - 4);
 *         6-bit sc of sub-block j: low nibble of scales[j] (j < 8) or
 *         high nibble of scales[j-8], top 2 bits = bits 2(j/4)..+1 of
 *         scales[8 + j%4]
 *   iq4_nl f16 d | u8 qs[16]          as q4_0's nibbles, x = d K[q] with the
 *         16-entry non-linear table K (cv_iq4_values)
 *   iq4_xs f16 d | u16 scales_h | u8 scales_l[4] | u8 qs[128]
 *         8 sub-blocks of 32, each 16 bytes as iq4_nl; 6-bit ls of
 *         sub-block j: nibble j%2 of scales_l[j/2] | bits 2j..2j+1 of
 *         scales_h << 4; x = d (ls - 32) K[q]
 *   mxfp4 u8 e | u8 qs[16]            as q4_0's nibbles, x = 2^(e-128) T[q]:
 *         T = E2M1 doubled (cv_mxfp4_values), e the E8M0 exponent; 2^(e-128)
 *         is half its 2^(e-127), which undoes the doubling */
#ifndef CV_KERNELS_INT_H
#define CV_KERNELS_INT_H

#include <assert.h>
#include <math.h>

#include "kernels/kernels.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define QK4_NL 32
#define QK_MXFP4 32
#define K_SCALE_SIZE 12

typedef uint16_t cv_f16;

typedef struct { cv_f16 d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
static_assert(sizeof(block_q4_0) == 18, "q4_0 block is 18 bytes");
typedef struct { cv_f16 d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
static_assert(sizeof(block_q4_1) == 20, "q4_1 block is 20 bytes");
typedef struct { cv_f16 d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
static_assert(sizeof(block_q5_0) == 22, "q5_0 block is 22 bytes");
typedef struct { cv_f16 d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
static_assert(sizeof(block_q5_1) == 24, "q5_1 block is 24 bytes");
typedef struct { cv_f16 d; int8_t qs[QK8_0]; } block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "q8_0 block is 34 bytes");
typedef struct { cv_f16 d, s; int8_t qs[QK8_1]; } block_q8_1;
static_assert(sizeof(block_q8_1) == 36, "q8_1 block is 36 bytes");
typedef struct { cv_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
static_assert(sizeof(block_q4_K) == 144, "q4_K block is 144 bytes");
typedef struct { cv_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
static_assert(sizeof(block_q5_K) == 176, "q5_K block is 176 bytes");
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; cv_f16 d; } block_q6_K;
static_assert(sizeof(block_q6_K) == 210, "q6_K block is 210 bytes");
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;
static_assert(sizeof(block_q8_K) == 292, "q8_K block is 292 bytes");
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; cv_f16 d, dmin; } block_q2_K;
static_assert(sizeof(block_q2_K) == 84, "q2_K block is 84 bytes");
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; cv_f16 d; } block_q3_K;
static_assert(sizeof(block_q3_K) == 110, "q3_K block is 110 bytes");
typedef struct { cv_f16 d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;
static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl block is 18 bytes");
typedef struct { cv_f16 d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs;
static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs block is 136 bytes");
typedef struct { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; } block_mxfp4;
static_assert(sizeof(block_mxfp4) == 17, "mxfp4 block is 17 bytes");

/* The level tables of the non-linear 4-bit types (dt_iq4_nl.c, dt_mxfp4.c):
 * iq4_nl/iq4_xs's K, and MXFP4's E2M1 values times 2 (so they are
 * integers: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, doubled). */
extern const int8_t cv_iq4_values[16];
extern const int8_t cv_mxfp4_values[16];

/* ---- scalar helpers ---- */

static inline float f16_to_f32(cv_f16 h) { return cv_fp16_to_fp32(h); }
static inline cv_f16 f32_to_f16(float f) { return cv_fp32_to_fp16(f); }

/* Round to nearest, ties to even (what the K-quant searches use); valid for
 * |x| < 2^22, which every caller guarantees by clamping its scale. */
static inline int nearest_int(float x) { return (int)lrintf(x); }

/* Scale and min of sub-block j (0..7) from the 12 packed bytes of a
 * q4_K/q5_K block: j < 4 keep 6 bits in bytes j and j+4; j >= 4 keep their
 * low 4 bits in byte j+4 and their top 2 bits in the top bits of bytes j-4
 * (scale) and j (min). */
static inline void k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Where value i (0..255) of a q2_K or q3_K block keeps its low 2 bits:
 * byte kq2_byte(i) of qs, shift kq2_shift(i); q3_K's third bit is bit i / 32
 * of hmask[i % 32]. */
static inline int kq2_byte(int i) { return 32 * (i / 128) + i % 32; }
static inline int kq2_shift(int i) { return 2 * ((i % 128) / 32); }

/* The level of value i of a q2_K block (0..3) and of a q3_K block (0..7;
 * the value is d * sc * (level - 4)). */
static inline int q2_k_level(const block_q2_K *x, int i) { return (x->qs[kq2_byte(i)] >> kq2_shift(i)) & 3; }
static inline int q3_k_level(const block_q3_K *x, int i)
{
    return ((x->qs[kq2_byte(i)] >> kq2_shift(i)) & 3) | (((x->hmask[i % 32] >> (i / 32)) & 1) << 2);
}

/* The 6-bit scale of sub-block j (0..15) of a q3_K block, minus its
 * offset 32 (so -32..31). */
static inline int q3_k_scale(const uint8_t *q, int j)
{
    const int lo = j < 8 ? q[j] & 0xF : q[j - 8] >> 4;
    const int hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* The 6-bit scale of sub-block j (0..7) of an iq4_xs block, minus 32. */
static inline int iq4_xs_scale(const uint8_t *scales_l, uint16_t scales_h, int j)
{
    const int lo = (scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
    return (lo | (((scales_h >> (2 * j)) & 3) << 4)) - 32;
}

/* MXFP4's scale 2^(e-128) from its E8M0 byte e, exactly as ggml converts
 * it: e >= 2 is the normal float with exponent field e - 1; e = 0 and 1
 * give the subnormals 2^-128 and 2^-127. e = 255 is 2^127 (E8M0's NaN code
 * is not treated specially). */
static inline float e8m0_half_to_f32(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ---- scale searches shared by the K-quant reference quantizers (kq_search.c) ---- */

/* Asymmetric (scale, min) for n values onto 0..nmax, weighted least squares
 * over nstep+1 candidate scales; returns the scale, stores -min in *neg_min
 * and the levels in L. */
float cv_kq_search_scale_min(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *neg_min,
                             uint8_t *Laux, float rmin, float rdelta, int nstep);
/* The q4_K / q5_K super-block: per sub-block of 32 the (scale, min) search
 * above with weights |x| + rms(x) (nstep + 1 candidates from rmin, levels
 * 0..nmax), the 8 scales and 8 mins quantized to 6 bits against their
 * maxima into scales[K_SCALE_SIZE] under *d and *dmin, and the levels L[QK_K]
 * recomputed with the stored scales. */
void cv_kq_superblock_scale_min(const float *x, int nmax, float rmin, int nstep, uint8_t *scales, cv_f16 *d,
                                cv_f16 *dmin, uint8_t *L);
/* Symmetric scale for n values onto -nmax..nmax-1 weighted by x^2, with a
 * search over 18 nearby scales; stores levels + nmax in L. */
float cv_kq_search_scale(int n, int nmax, const float *x, int8_t *L);
/* Scale for n values onto d * cv_iq4_values[L] (dt_iq4_nl.c): the least-
 * squares scale of the best of a sweep of candidates; stores the level
 * indices (0..15) in L. Returns 0 (and L = the index of the level nearest
 * zero) for an all-zero group. */
float cv_iq4_search_scale(int n, const float *x, uint8_t *L);
/* Index of the level of cv_iq4_values nearest v (in units of the scale). */
int cv_iq4_nearest(float v);

/* ---- per-dtype functions (dt_*.c scalar, dt_*_avx2.c AVX2) ---- */

/* The 8 six-bit scales and mins of a q4_K / q5_K super-block's
 * scales[K_SCALE_SIZE] into sc[8] and m[8] (dt_q4_k_avx2.c; the q5_K tiles
 * unpack the same bytes). */
void cv_kq_unpack_scales(const uint8_t *q, uint8_t *sc, uint8_t *m);

#define CV_DT_DECL(name)                                                        \
    void cv_dt_##name##_to_f32(const void *src, float *dst, int64_t n);         \
    void cv_dt_##name##_from_f32(const float *src, void *dst, int64_t n);       \
    void cv_dt_##name##_to_f32_avx2(const void *src, float *dst, int64_t n);    \
    void cv_dt_##name##_from_f32_avx2(const float *src, void *dst, int64_t n)
CV_DT_DECL(f32);
CV_DT_DECL(f16);
CV_DT_DECL(bf16);
CV_DT_DECL(q4_0);
CV_DT_DECL(q4_1);
CV_DT_DECL(q5_0);
CV_DT_DECL(q5_1);
CV_DT_DECL(q8_0);
CV_DT_DECL(q8_1);
CV_DT_DECL(q4_K);
CV_DT_DECL(q5_K);
CV_DT_DECL(q6_K);
CV_DT_DECL(q8_K);
CV_DT_DECL(q2_K);
CV_DT_DECL(q3_K);
CV_DT_DECL(iq4_nl);
CV_DT_DECL(iq4_xs);
CV_DT_DECL(mxfp4);
#undef CV_DT_DECL

/* vec_dot (weight row, activation row). */
void cv_dt_f32_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_f16_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_bf16_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q4_0_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q4_1_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q5_0_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q5_1_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q8_0_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q4_K_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q5_K_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q6_K_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q2_K_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q3_K_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_iq4_nl_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_iq4_xs_dot(int64_t n, const void *w, const void *a, float *out);
void cv_dt_mxfp4_dot(int64_t n, const void *w, const void *a, float *out);

void cv_dt_f32_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_f16_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_bf16_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q4_0_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q4_1_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q5_0_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q5_1_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q8_0_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q4_K_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q5_K_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q6_K_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q2_K_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_q3_K_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_iq4_nl_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_iq4_xs_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_mxfp4_dot_avx2(int64_t n, const void *w, const void *a, float *out);
void cv_dt_f32_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void cv_dt_f16_dot_avx512(int64_t n, const void *w, const void *a, float *out);
void cv_dt_bf16_dot_avx512(int64_t n, const void *w, const void *a, float *out);

/* ---- vector ops per ISA (vec.c, vec_avx2.c) ---- */

extern const cv_vec_ops cv_vec_ops_scalar;
extern const cv_vec_ops cv_vec_ops_avx2;
/* 2 sqrt(2/pi): the tanh GELU's argument doubled, for its sigmoid form
 * gelu(x) = x sigmoid(CV_GELU_2C (x + 0.044715 x^3)). */
#define CV_GELU_2C 1.5957691216057308f
/* cos/sin of the n_rot/2 rotation angles of one position (vec.c). */
void cv_rope_cos_sin(const cv_rope_params *p, int64_t pos, float *cs, float *sn);

/* ---- matmul implementations (matmul.c drives them) ---- */

struct cv_wmat {
    uint32_t type;
    int64_t n_in, n_out;
    cv_isa isa;
    const cv_dtype *dt;
    cv_dtype_ops ops;            /* the dtype's functions for isa */
    cv_dtype_ops act_ops;        /* its activation type's functions for isa */
    const struct cv_mm_impl *impl;
    const void *data;            /* packed weights, or the caller's rows */
    void *owned;                 /* packed copy we free, or NULL */
    size_t row_bytes;            /* GGUF bytes of one row */
};

/* A job for one matmul: the prepared weights, the activations after the
 * implementation's quantize step (act_row_bytes apart, one row per token),
 * and the output: token t's in row t of y, or in row y_rows[t] (the
 * expert-routed matmul writes each route's row where its caller wants it). */
typedef struct cv_mm_job {
    const cv_wmat *w;
    const uint8_t *act;      /* quantized activations [n_tok][act_row_bytes] */
    size_t act_row_bytes;
    int64_t n_in, n_out, n_tok;
    float *y;
    int64_t ldy;
    const int32_t *y_rows;   /* NULL, or the row of y of each token */
} cv_mm_job;

/* Where token t's outputs go. */
static inline float *cv_mm_y_row(const cv_mm_job *job, int64_t t)
{
    return job->y + (job->y_rows ? job->y_rows[t] : t) * job->ldy;
}

/* How one (dtype, ISA) computes a matmul. Rows are handled in groups of
 * `rows_per_group` (the interleave of the packed layout); the driver splits
 * whole groups over threads, so a group never straddles two threads. */
typedef struct cv_mm_impl {
    const char *name; /* for corvid doctor: "avx2 tile 16x4, repacked" */
    int rows_per_group;
    /* Packed size and packing; pack == NULL means the kernel reads the
     * GGUF rows in place. */
    size_t (*pack_bytes)(int64_t n_in, int64_t n_out);
    void (*pack)(const void *src, int64_t n_in, int64_t n_out, void *dst);
    /* Bytes of one quantized activation row and the quantizer. */
    size_t (*act_row_bytes)(const cv_wmat *w);
    void (*quant_act)(const cv_wmat *w, const float *x, void *dst);
    /* Y for row groups [g0, g1) and tokens [t0, t1): writes exactly
     * cv_mm_y_row(job, t)[o] for those tokens and the rows o < n_out of
     * those groups. Each output's bits depend only on its weight row and its
     * token's activation row, never on which other tokens or groups share
     * the call (cv_matmul_experts runs an expert's routed rows as one batch
     * and promises the bits of each row alone). */
    void (*run)(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0, int64_t t1);
} cv_mm_impl;

/* The 16-row packs a weight type's tiles share across levels (made by its
 * dt_*_avx2.c, which writes the layout out): 4 consecutive values of a row
 * in 4 bytes, rows 0-7 and 8-15 in two 32-byte halves side by side, so a
 * 256-bit tile reads a half and a 512-bit one both at once. pack16_bytes is
 * the packed size of W [n_out][n_in]. */
#define CV_PACK16_DECL(name)                                                    \
    size_t cv_##name##_pack16_bytes(int64_t n_in, int64_t n_out);              \
    void cv_##name##_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
CV_PACK16_DECL(q4_0);
CV_PACK16_DECL(q4_1);
CV_PACK16_DECL(q5_0);
CV_PACK16_DECL(q5_1);
CV_PACK16_DECL(q8_0);
CV_PACK16_DECL(iq4_nl);
CV_PACK16_DECL(mxfp4);
CV_PACK16_DECL(q2_K);
CV_PACK16_DECL(q3_K);
CV_PACK16_DECL(q4_K);
CV_PACK16_DECL(q5_K);
CV_PACK16_DECL(q6_K);
CV_PACK16_DECL(iq4_xs);
#undef CV_PACK16_DECL

/* Each level's implementation for a weight type, or NULL (matmul_avx2.c,
 * matmul_avxvnni.c, matmul_avx512.c: one table each). A level may share a
 * lower level's pack (its tiles then read the same layout), and a wmat's
 * packed bytes are only ever read by the implementation it was made with. */
const cv_mm_impl *cv_mm_impl_avx2(uint32_t type);
const cv_mm_impl *cv_mm_impl_avx_vnni(uint32_t type);
const cv_mm_impl *cv_mm_impl_avx512(uint32_t type);

/* ---- driver policy shared by cv_matmul and cv_matmul_experts ---- */

/* Quantizing a row is ~1 us per 2k values: below this many values in all
 * (a decode step, a small batch) waking the pool costs more than it saves,
 * so the caller's thread quantizes them alone. */
#define CV_MM_QUANT_INLINE_VALUES 32768
/* Work items per thread of a matmul's compute job (taken from one counter):
 * enough that a thread which loses its core delays the job by one short
 * item, few enough that each item streams a long slice of weights. */
#define CV_MM_CHUNKS_PER_THREAD 8

/* The largest act_row_bytes any weight type's implementation, on any ISA
 * this CPU runs, needs for a row of at most n_in values (every activation
 * layout grows with n_in: levels per value plus numbers per block, so the
 * widest row at n_in bounds all shorter ones). Sizes scratch that must fit
 * whatever type a later matmul brings (cv_mm_ws). */
size_t cv_mm_act_row_bytes_max(int64_t n_in);

/* ---- the machine probes' inner loops (probe.c times them) ---- */

/* Reads n bytes at p with 256-bit loads; returns a value folded from them
 * (so the loads cannot be dropped). */
uint64_t cv_probe_read_avx2(const void *p, size_t n);
/* iters iterations of each level's int8 multiply-add loop (probe_avx2.c,
 * probe_avxvnni.c, probe_avx512.c); each returns a value folded from its
 * accumulators (so the loop cannot be dropped). */
uint64_t cv_probe_int8_avx2(int64_t iters);
uint64_t cv_probe_int8_i32_avx2(int64_t iters);
uint64_t cv_probe_int8_vnni_avxvnni(int64_t iters);
uint64_t cv_probe_int8_vnni_avx512(int64_t iters);

#endif
