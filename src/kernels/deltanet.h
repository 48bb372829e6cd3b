/* deltanet.h — the Gated DeltaNet mixer's kernels on the CPU: its two
 * inner loops per ISA level (deltanet.c has the scalar reference and the
 * chunked form; deltanet_avx2.c and deltanet_avx512.c the fast loops), and
 * the chunked form over them. The mixer (engine/mix_deltanet.c) owns the
 * projections, the conv, the state slots and which tokens take which form;
 * the derivation of the chunked form heads deltanet.c. */
#ifndef CV_KERNELS_DELTANET_H
#define CV_KERNELS_DELTANET_H

#include "kernels/kernels.h"

/* Positions per chunk of the chunked (parallel) form. Chunks start at
 * multiples of it in the sequence, whatever the calls' boundaries, so a
 * prompt fed in pieces runs the same chunks as in one call. */
#define CV_DN_CHUNK 64

/* The two inner loops the mixer runs per value head, per ISA. */
typedef struct dn_kernels {
    /* C[M][N] = (acc ? C : 0) + alpha * A[M][K] B[K][N]; rows lda, ldb,
     * ldc floats apart; C overlaps neither A nor B. */
    void (*gemm)(int32_t M, int32_t N, int32_t K, float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float *C, int64_t ldc, bool acc);
    /* One token through one value head (the recurrent form): S [d][d] is
     * decayed by exp(g), corrected toward v along k with strength beta, and
     * read by q into o [d]. q is already scaled by 1/sqrt(d). scratch holds
     * d floats. */
    void (*step)(int32_t d, float *S, const float *q, const float *k, const float *v, float beta, float g, float *o,
                 float *scratch);
} dn_kernels;

extern const dn_kernels cv_dn_kernels_scalar;
extern const dn_kernels cv_dn_kernels_avx2;   /* needs d % 8 == 0 */
extern const dn_kernels cv_dn_kernels_avx512; /* needs d % 16 == 0 */
/* Level isa's own loops for head size d, or NULL (a level this CPU lacks,
 * one without loops of its own, a d it cannot take). */
const dn_kernels *cv_dn_kernels_at(cv_isa isa, int32_t d);
/* The loops of the process's level for d, else of the next level down that
 * has them; and their name. */
const dn_kernels *cv_dn_kernels_for(int32_t d);
const char *cv_dn_kernels_name(const dn_kernels *kn);
/* Why level isa has no loops of its own for d, in words, or NULL when it
 * does (`corvid doctor`). */
const char *cv_dn_kernels_why_not(cv_isa isa, int32_t d);

/* n (1..CV_DN_CHUNK) consecutive tokens of one value head through S by the
 * chunked form (the derivation heads deltanet.c): q, k, v [n][d]
 * contiguous (q scaled by 1/sqrt(d)), beta and g [n]; writes o [n][d] and
 * leaves S as the step form would after the n tokens, up to rounding.
 * scratch holds cv_dn_chunk_floats(d) floats. */
void cv_dn_chunk(const dn_kernels *kn, const cv_vec_ops *vec, int32_t d, int32_t n, float *S, const float *q,
                 const float *k, const float *v, const float *beta, const float *g, float *o, float *scratch);
size_t cv_dn_chunk_floats(int32_t d);

#endif
