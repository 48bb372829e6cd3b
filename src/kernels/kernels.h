/* kernels — the face of the compute layer: the dtype table (quantize,
 * dequantize and dot product for every tensor type corvid computes with),
 * prepared weight matrices and the batched matmul over them (dense, and
 * routed to experts for mixture-of-experts FFNs), the vector ops a
 * transformer forward pass needs, CPU feature detection with a run-time ISA
 * choice, and the machine probes `corvid bench` measures ceilings with.
 *
 * ISA levels. Every function exists as a scalar reference (portable C, the
 * definition tests compare against) and, where it matters, versions for
 * the SIMD levels below, each compiled into its own files (*_avx2.c,
 * *_avxvnni.c, *_avx512.c) with only that level's flags. The binary is
 * baseline x86-64; the process picks its level once, from CPUID, and
 * $CORVID_ISA=scalar|avx2|avx-vnni|avx512 lowers it (tests, `corvid doctor`
 * and a user who suspects a SIMD bug use it). An operation a level has no
 * version of runs the next level down that this CPU has (cv_isa_fallback),
 * so each operation takes the fastest path the process allows, and says
 * which (cv_matmul_path, `corvid doctor`). The plain entry points
 * (cv_matmul, cv_rmsnorm, ...) use the process level; the per-level
 * tables (cv_dtypes[].ops[isa], cv_vec_ops_for(isa)) let a test call each.
 *
 * Shapes follow ggml: a weight matrix W has ne[0] = n_in (row length) and
 * ne[1] = n_out rows, rows contiguous, each row n_in / block_elems blocks.
 * Activations are f32, one row of n_in per token: X [n_tok][n_in].
 *
 * Threads: every function here is reentrant except that a cv_pool runs one
 * job at a time (base.h); the matmul runs on the pool it is given. */
#ifndef CV_KERNELS_H
#define CV_KERNELS_H

#include "base/base.h"
#include "gguf/gguf.h"

/* ---- CPU features and ISA choice ---- */

typedef enum cv_isa {
    CV_ISA_SCALAR = 0,   /* portable C: the reference */
    CV_ISA_AVX2 = 1,     /* AVX2 + FMA + F16C + BMI2 */
    CV_ISA_AVX_VNNI = 2, /* AVX2 + AVX-VNNI: 256-bit vpdpbusd (Alder Lake and later, Zen 5) */
    CV_ISA_AVX512 = 3,   /* AVX2 + AVX-512 F, BW, VL, DQ and VNNI (Ice Lake, Zen 4 and later); its
                            BF16 paths run only where the CPU also has AVX512_BF16 */
    CV_ISA_COUNT
} cv_isa;

typedef struct cv_cpu_features {
    char vendor[13];     /* "AuthenticAMD", "GenuineIntel" */
    char brand[49];      /* the processor brand string, trimmed */
    uint32_t family, model;
    bool sse42, avx, avx2, fma, f16c, bmi2;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512_vnni, avx512_bf16, avx_vnni;
    bool os_avx;         /* the OS saves YMM state (XGETBV), so AVX is usable */
    bool os_avx512;      /* ... and ZMM/opmask state */
} cv_cpu_features;

/* CPUID read once per process (cached; thread-safe). */
const cv_cpu_features *cv_cpu_features_get(void);
/* The best level this CPU and OS support, ignoring $CORVID_ISA (levels are
 * ordered by preference: avx512 > avx-vnni > avx2 > scalar; a CPU may have
 * avx512 without avx-vnni, as Zen 4 does). */
cv_isa cv_isa_best(void);
/* The level the plain entry points use: cv_isa_best(), lowered by
 * $CORVID_ISA (read once; a level this CPU cannot run is warned about and
 * the best one below it taken; an unknown value is warned about and
 * ignored). */
cv_isa cv_isa_active(void);
/* "scalar", "avx2", "avx-vnni", "avx512". */
const char *cv_isa_name(cv_isa isa);
/* Whether this CPU can run `isa` (tests skip a level it cannot). */
bool cv_isa_supported(cv_isa isa);
/* Why this CPU cannot run `isa`, in words ("no AVX-512 VNNI on this CPU",
 * "the OS does not save ZMM state"), or NULL when it can. */
const char *cv_isa_missing(cv_isa isa);
/* The level an operation that `isa` has no version of runs at: the next
 * lower level this CPU runs (scalar for scalar). */
cv_isa cv_isa_fallback(cv_isa isa);

/* Positions per block of the paged K/V cache (kernels/attention.h lays a
 * block out; the engine's sequences hold blocks). 16 keeps the waste of a
 * sequence's last block small and lets a prefix cache share at a fine
 * grain (vLLM's default). */
#define CV_KV_BLOCK 16

/* ---- dtype table ---- */

/* Dequantize n values (n a multiple of block_elems) from src to dst. */
typedef void (*cv_to_f32_fn)(const void *src, float *dst, int64_t n);
/* Quantize n values (n a multiple of block_elems) from src into blocks. */
typedef void (*cv_from_f32_fn)(const float *src, void *dst, int64_t n);
/* Dot product of one weight row w (this dtype) with one activation row a
 * (the dtype's vec_dot_type), n elements; the result in *out. */
typedef void (*cv_vec_dot_fn)(int64_t n, const void *w, const void *a, float *out);

typedef struct cv_dtype_ops {
    cv_to_f32_fn to_f32;
    cv_from_f32_fn from_f32;
    cv_vec_dot_fn vec_dot;
} cv_dtype_ops;

/* One row per ggml type id corvid computes with. Block geometry equals the
 * GGUF format table (cv_ggml_type_info_get; a test checks). from_f32 of the
 * scalar ops is the reference quantizer (round-to-nearest with ggml's scale
 * search for K-quants; see docs/KERNELS.md); an ISA whose slot is NULL uses
 * the scalar function. Activation-only types (Q8_1, Q8_K) have no vec_dot. */
typedef struct cv_dtype {
    const char *name;       /* "q4_K", as ggml names it; NULL: not supported */
    uint32_t type;          /* cv_ggml_type id (also the table index) */
    uint32_t block_elems;
    uint32_t block_bytes;
    bool is_quantized;
    bool is_weight;         /* may be the W of a matmul */
    uint32_t vec_dot_type;  /* activation type its dot product wants */
    cv_dtype_ops ops[CV_ISA_COUNT];
} cv_dtype;

extern const cv_dtype cv_dtypes[CV_GGML_TYPE_COUNT];

/* The row for a type id, or NULL when corvid cannot compute with it. */
const cv_dtype *cv_dtype_get(uint32_t type);
/* The ops of a dtype for an ISA, each NULL slot filled from the next level
 * down that has it (cv_isa_fallback), scalar last. */
cv_dtype_ops cv_dtype_ops_for(const cv_dtype *dt, cv_isa isa);
/* The level whose vec_dot cv_dtype_ops_for(dt, isa) takes (corvid doctor). */
cv_isa cv_dtype_dot_isa(const cv_dtype *dt, cv_isa isa);

/* Dequantize a row of n elements of `type` (an embedding lookup: pass the
 * row's bytes, at any alignment). Returns CV_EUNSUPPORTED for a type outside
 * the table and CV_EINVAL when n is not a multiple of the block. Uses the
 * process ISA. (The cv_dtype_ops functions themselves want 4-byte aligned
 * blocks, as GGUF's default alignment gives.) */
int cv_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n, cv_err *err);
/* Quantize with the reference quantizer (used by `corvid synth`); dst at
 * any alignment. */
int cv_quantize_row(uint32_t type, const float *src, void *dst, int64_t n, cv_err *err);

/* ---- prepared weights and matmul ---- */

/* A weight matrix prepared for the matmul: possibly repacked (rows
 * interleaved for SIMD) into memory it owns, else pointing at the caller's
 * data, which must then outlive it. Immutable after creation, so any number
 * of threads may run matmuls on it. */
typedef struct cv_wmat cv_wmat;

/* Prepares W [n_out][n_in] of `type` from data (n_bytes must equal
 * n_out * row bytes, any alignment) for the process ISA. Fails with CV_EUNSUPPORTED for a
 * type that is not a weight dtype, CV_EINVAL for n_in not a multiple of the
 * block, non-positive sizes or a byte count that does not match, CV_ELIMIT
 * beyond CV_MAX_MATMUL_DIM. The caller destroys it with cv_wmat_destroy. */
int cv_wmat_create(uint32_t type, int64_t n_in, int64_t n_out, const void *data, size_t n_bytes, cv_wmat **out,
                   cv_err *err);
/* The same for a given ISA (tests, doctor, bench); CV_EUNSUPPORTED when the
 * CPU cannot run it. */
int cv_wmat_create_isa(uint32_t type, int64_t n_in, int64_t n_out, const void *data, size_t n_bytes, cv_isa isa,
                       cv_wmat **out, cv_err *err);
void cv_wmat_destroy(cv_wmat *w);
uint32_t cv_wmat_type(const cv_wmat *w);
int64_t cv_wmat_n_in(const cv_wmat *w);
int64_t cv_wmat_n_out(const cv_wmat *w);
cv_isa cv_wmat_isa(const cv_wmat *w);
/* Bytes of weight data one full matmul reads (the GGUF size of W). */
size_t cv_wmat_bytes(const cv_wmat *w);
/* True when w holds its own (repacked) copy of the weights, so the data it
 * was created from may be freed; false when it reads the caller's data. */
bool cv_wmat_is_packed(const cv_wmat *w);
/* True when the weights were repacked into memory the wmat owns, so the
 * caller's data is no longer needed (a loader may drop those mmap pages). */
bool cv_wmat_owns_data(const cv_wmat *w);

/* Y[t][o] = sum_i W[o][i] * X[t][i] for t < n_tok, o < n_out. X rows are
 * ldx floats apart, Y rows ldy apart (ldx >= n_in, ldy >= n_out). Quantized
 * weights quantize each X row once (to the dtype's vec_dot_type) and use
 * integer dot products; F16/BF16/F32 weights use f32 activations. Splits
 * output rows over the pool's threads (pool may be NULL: one thread).
 * Allocates its activation scratch per call (aborts only if the OS has no
 * memory). n_tok == 0 does nothing. X and Y must not overlap. */
void cv_matmul_strided(cv_pool *pool, const cv_wmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y,
                       int64_t ldy);
/* The same with the caller's activation scratch: act holds at least
 * cv_wmat_act_bytes(w, n_tok) bytes, aligned to 64 (a caller that keeps one
 * buffer, committed once, allocates nothing a call). */
void cv_matmul_strided_act(cv_pool *pool, const cv_wmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y,
                           int64_t ldy, void *act);
/* Bytes of activation scratch a matmul of n_tok rows with w uses. */
size_t cv_wmat_act_bytes(const cv_wmat *w, int64_t n_tok);
/* The same with contiguous rows: X [n_tok][n_in], Y [n_tok][n_out]. */
void cv_matmul(cv_pool *pool, const cv_wmat *w, int64_t n_tok, const float *x, float *y);
/* How a matmul of weight type `type` runs on `isa`, in words (corvid
 * doctor); the dot it uses is cv_dtypes[type].ops[isa].vec_dot. */
const char *cv_matmul_path(uint32_t type, cv_isa isa);

/* ---- expert-routed matmul (mixture-of-experts FFNs) ---- */

/* Scratch for expert-routed matmuls, sized once for the largest call, so
 * that a matmul through it allocates nothing. max_rows bounds the routes of
 * a call (routed (token, expert) pairs: tokens of a step x experts used per
 * token) and the X rows it reads; max_n_in and max_n_out the widest input
 * row and output of the matrices it will meet; n_expert their number of
 * experts. Its large buffer (max_rows activation rows as wide as any
 * weight type needs, up to 4 bytes a value for f32 weights) is reserved
 * address space: only the pages a call writes take memory, about 1.2 bytes
 * per input value of the call for quantized weights (a decode step's few
 * routes touch a few KiB); outputs go straight into the caller's Y, so
 * max_n_out only bounds what a call may be given (asserted). The sizes
 * are the caller's, from a validated model and its own batch limit: each
 * must be >= 1, max_n_in and max_n_out <= CV_MAX_MATMUL_DIM, max_rows <=
 * INT32_MAX (asserted). Aborts with a message when the OS refuses the
 * address space, like cv_xmalloc. One matmul at a time per workspace (it
 * holds the call's bookkeeping); the caller destroys it (NULL is fine). */
typedef struct cv_mm_ws cv_mm_ws;
cv_mm_ws *cv_mm_ws_create(int64_t max_rows, int64_t max_n_in, int64_t max_n_out, int32_t n_expert);
void cv_mm_ws_destroy(cv_mm_ws *ws);
/* Commits the workspace's activation rows now for calls whose quantized
 * rows take at most row_bytes each (cv_wmat_act_bytes(w, 1) of the experts
 * it will multiply), so that its first call does not touch fresh pages. */
void cv_mm_ws_commit(cv_mm_ws *ws, size_t row_bytes);

/* Y[r] = W[expert[r]] X[src[r]] for each route r < n_rows: the expert
 * matmul of a mixture-of-experts FFN (ggml's mul_mat_id). w holds n_expert
 * prepared matrices of one type, ISA and shape (the slices of an expert
 * tensor). Route r names its expert (0 <= expert[r] < n_expert) and its
 * input row of X [n_x][ldx] (0 <= src[r] < n_x; src NULL: row r, and
 * n_x >= n_rows); its output is row r of Y, ldy floats apart (ldy >= n_out,
 * ldx >= n_in; the gaps are left alone).
 * An expert no route names is never touched: its entry may be NULL, and
 * neither its cv_wmat nor its weights are read (a loader may leave its
 * pages unmapped or cold).
 * Each X row some route reads is quantized once (gate/up of a token's k
 * experts share one input row). Routes are grouped by expert, keeping their
 * order, so each expert's weights stream once per call for all its routes,
 * through the same tiles as cv_matmul (the ~32 routes per expert of a
 * prefill are tiled as a dense batch; a decode batch reads the union of its
 * rows' experts). One pool job runs over (expert, chunk of row groups)
 * items from one counter, chunks sized so that items cost alike whatever
 * the experts' loads (pool may be NULL: one thread).
 * Results are the same bits as cv_matmul of each route's X row alone with
 * its expert's matrix, whatever the pool, the order of the routes and the
 * routing of the others.
 * Needs n_rows <= the workspace's max_rows (n_x too when src is given),
 * n_expert <= its n_expert, the matrices' n_in and n_out <= its max_n_in
 * and max_n_out (asserted, like the shapes: they are the caller's
 * invariants). Allocates nothing; n_rows == 0 does nothing. X, Y and the
 * workspace must not overlap. */
void cv_matmul_experts(cv_pool *pool, const cv_wmat *const *w, int32_t n_expert, int64_t n_x, const float *x,
                       int64_t ldx, int64_t n_rows, const int32_t *expert, const int32_t *src, float *y, int64_t ldy,
                       cv_mm_ws *ws);

/* ---- vector ops ---- */

typedef enum cv_rope_style {
    CV_ROPE_NORM = 0, /* rotate adjacent pairs (x[2i], x[2i+1]): llama, mistral */
    CV_ROPE_NEOX = 1, /* rotate (x[i], x[i + n_rot/2]): qwen2, qwen3, gpt-neox */
} cv_rope_style;

/* Rotary position embedding for one token. Pair i (i < n_rot/2) of each head
 * is rotated by angle pos * freq_scale * theta^(-2i/n_rot) / freq_factors[i].
 * freq_factors (NULL: all 1) holds the per-dimension divisors the model
 * loader precomputes (llama3's, or YaRN's ramp between interpolated and
 * original frequencies); freq_scale is linear position scaling (1: none).
 * mscale multiplies cos and sin (YaRN's attention factor; 0 or 1: none), so
 * a rotated pair also grows by it. Dimensions n_rot..head_dim of each head
 * are left as they are. */
typedef struct cv_rope_params {
    cv_rope_style style;
    int32_t n_rot;              /* even, <= head_dim and <= CV_MAX_ROPE_DIMS (the loader checks) */
    float theta;                /* rope base, e.g. 10000 or 1e6 */
    float freq_scale;           /* 1 for none */
    const float *freq_factors;  /* [n_rot/2] or NULL */
    float mscale;               /* 0 or 1 for none */
} cv_rope_params;

/* The per-ISA vector ops (cv_vec_ops) and their process-ISA wrappers below.
 * All take n >= 0 and accept unaligned pointers; in-place use (y == x) is
 * allowed where noted. */
typedef struct cv_vec_ops {
    /* y = x / sqrt(mean(x^2) + eps) * w (w NULL: no weight); y may be x. */
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* y = silu(g) * u (SwiGLU); y may be g or u. */
    void (*swiglu)(float *y, const float *g, const float *u, int64_t n);
    /* y = gelu(g) * u (GeGLU) with the tanh form of GELU,
     * 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), computed as
     * g * sigmoid(2 sqrt(2/pi) (g + 0.044715 g^3)), the same function; y may
     * be g or u. */
    void (*geglu)(float *y, const float *g, const float *u, int64_t n);
    /* The clamped SwiGLU of gpt-oss: g' = min(g, limit),
     * u' = clamp(u, -limit, limit), y = g' sigmoid(alpha g') (u' + 1); y may
     * be g or u. */
    void (*swiglu_clamped)(float *y, const float *g, const float *u, int64_t n, float alpha, float limit);
    /* y = x * sigmoid(g) (an output gate; silu(x) is x gated by itself);
     * y may be x or g. */
    void (*sigmoid_mul)(float *y, const float *x, const float *g, int64_t n);
    /* y = e^x; y may be x. Underflows to 0 (-INFINITY gives 0). */
    void (*exp)(float *y, const float *x, int64_t n);
    /* x = softmax(x) in place (max-subtracted); returns the sum of exps
     * before normalisation. n == 0 returns 0. -INFINITY entries become 0. */
    float (*softmax)(float *x, int64_t n);
    /* y = a + b; y may be a or b. */
    void (*add)(float *y, const float *a, const float *b, int64_t n);
    /* x *= s */
    void (*scale)(float *x, float s, int64_t n);
    /* y += a * x */
    void (*axpy)(float *y, float a, const float *x, int64_t n);
    /* y += a * x with x in f16 (attention over an f16 V cache) */
    void (*axpy_f16)(float *y, float a, const uint16_t *x, int64_t n);
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    /* dot of an f16 vector with an f32 one (attention over an f16 K cache) */
    float (*dot_f16)(const uint16_t *a, const float *b, int64_t n);
    void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n); /* round to nearest even */
    void (*bf16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_bf16)(const float *src, uint16_t *dst, int64_t n); /* round to nearest even */
    /* RoPE on x [n_head][head_dim] for one token at position pos. */
    void (*rope)(const cv_rope_params *p, float *x, int32_t n_head, int32_t head_dim, int64_t pos);
    /* The first index of the largest value; NaNs never win, but a NaN at
     * index 0 is kept (the scalar loop "x[i] > x[best]" from best = 0).
     * n == 0 returns 0. */
    int64_t (*argmax)(const float *x, int64_t n);
} cv_vec_ops;

/* The ops for an ISA (scalar for one the CPU cannot run). */
const cv_vec_ops *cv_vec_ops_for(cv_isa isa);
/* The level cv_vec_ops_for(isa) runs at, and why not isa itself (NULL when
 * it does): `corvid doctor`'s operations list. */
cv_isa cv_vec_ops_level(cv_isa isa);
const char *cv_vec_ops_why_not(cv_isa isa);

void cv_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
void cv_swiglu(float *y, const float *g, const float *u, int64_t n);
void cv_geglu(float *y, const float *g, const float *u, int64_t n);
void cv_swiglu_clamped(float *y, const float *g, const float *u, int64_t n, float alpha, float limit);
void cv_sigmoid_mul(float *y, const float *x, const float *g, int64_t n);
void cv_exp(float *y, const float *x, int64_t n);
float cv_softmax(float *x, int64_t n);
void cv_add(float *y, const float *a, const float *b, int64_t n);
void cv_scale(float *x, float s, int64_t n);
void cv_axpy(float *y, float a, const float *x, int64_t n);
void cv_axpy_f16(float *y, float a, const uint16_t *x, int64_t n);
float cv_dot_f32(const float *a, const float *b, int64_t n);
float cv_dot_f16(const uint16_t *a, const float *b, int64_t n);
void cv_f16_to_f32(const uint16_t *src, float *dst, int64_t n);
void cv_f32_to_f16(const float *src, uint16_t *dst, int64_t n);
void cv_bf16_to_f32(const uint16_t *src, float *dst, int64_t n);
void cv_f32_to_bf16(const float *src, uint16_t *dst, int64_t n);
void cv_rope(const cv_rope_params *p, float *x, int32_t n_head, int32_t head_dim, int64_t pos);
int64_t cv_argmax_f32(const float *x, int64_t n);

/* Single values (exact conversions; round to nearest even into f16/bf16). */
float cv_fp16_to_fp32(uint16_t h);
uint16_t cv_fp32_to_fp16(float f);
float cv_bf16_to_fp32(uint16_t h);
uint16_t cv_fp32_to_bf16(float f);

/* ---- machine probes (corvid bench, corvid doctor) ---- */

typedef struct cv_probe_result {
    double value;      /* median over repeats: GB/s or int8 multiply-adds/s */
    double best;       /* best repeat */
    int n_repeats;
    int n_threads;
    size_t work;       /* bytes read or multiply-adds per repeat */
    double cpu_value;  /* median rate by the calling thread's CPU time: with a
                        * 1-thread pool, the rate while it actually ran (time
                        * slices given to other processes do not count) */
} cv_probe_result;

/* Read bandwidth: every thread of the pool sums its share of a 256 MiB
 * buffer (far above any last-level cache; transparent huge pages where the
 * OS grants them, like prepared weights) with 256-bit loads
 * (plain f32 adds as a scalar fallback); value is bytes read per second /
 * 1e9 (GB/s), median of repeats after one warm-up pass that also faults the
 * pages in. This is the ceiling for decode: a matvec cannot read its weights
 * faster than this. */
int cv_probe_read_bandwidth(cv_pool *pool, cv_probe_result *out, cv_err *err);
/* Int8 multiply-add peak of ISA level isa: every thread runs a
 * register-only loop of independent instances of the level's byte
 * multiply, the inner step of its matmul tiles: avx2, vpmaddubsw (32 u8 x
 * s8 products, summed in pairs to int16) accumulated with vpaddw, the most
 * int8 multiply-adds any AVX2 sequence issues; avx-vnni and avx512,
 * vpdpbusd on 256 and 512 bits (32 and 64 products summed by fours into
 * int32 in one instruction). value is multiply-adds per second, median of
 * repeats. CV_EUNSUPPORTED for scalar or a level this CPU lacks. The
 * process level's is the compute ceiling prefill and batched decode are
 * measured against (corvid bench). */
int cv_probe_int8_peak(cv_pool *pool, cv_isa isa, cv_probe_result *out, cv_err *err);
/* The instruction cv_probe_int8_peak runs for isa, in words. */
const char *cv_probe_int8_what(cv_isa isa);
/* The same with a vpmaddwd per product vector (pairs summed to int32,
 * then vpaddd): the step of a dot whose int16 sums could overflow, i.e.
 * q8_0 x q8_0 and most other engines' quantized dots. Reported for context;
 * it is lower than cv_probe_int8_peak wherever vpmaddwd shares the
 * multiplier. */
int cv_probe_int8_peak_i32(cv_pool *pool, cv_probe_result *out, cv_err *err);

#endif
