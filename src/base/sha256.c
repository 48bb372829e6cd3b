/* sha256.c — incremental SHA-256 (FIPS 180-4, section 6.2) for checking
 * downloads against the sha256 the hub publishes (X-Linked-Etag). Hashing
 * runs while bytes arrive, so a multi-GB pull needs no second read; a
 * resumed pull hashes the partial file once and continues.
 *
 * Speed matters: the portable compression runs at ~250 MB/s on one core,
 * slower than a fast link delivers a model, so where the CPU has the SHA
 * extensions (Intel since Goldmont/Ice Lake, every AMD Zen) the blocks go
 * through SHA256RNDS2/MSG1/MSG2 instead, chosen at run time (docs/PERF.md,
 * "Downloads"). Both paths are checked against each other and against the
 * FIPS vectors (tests/cli/test_cli_models.c). It lives in base because the
 * kernels' fixture test hashes its outputs with it too. */
#include <cpuid.h>
#include <immintrin.h>
#include <stdio.h>

#include "base/base.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

/* ---- SHA extensions ---- */

/* Processes n 64-byte blocks. The state lives in two registers as the
 * instructions want it: ABEF (A in the top lane) and CDGH. Each
 * SHA256RNDS2 does two rounds and returns the new ABEF; after two of them
 * the roles of the registers are back where they started, since two rounds
 * turn the old ABEF into the new CDGH. */
__attribute__((target("sha,sse4.1"))) static void blocks_ni(uint32_t h[8], const uint8_t *p, size_t n)
{
    const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    __m128i t = _mm_loadu_si128((const __m128i *)h);            /* a b c d (lane 0 first) */
    __m128i s1 = _mm_loadu_si128((const __m128i *)(h + 4));     /* e f g h */
    t = _mm_shuffle_epi32(t, 0xB1);                             /* b a d c */
    s1 = _mm_shuffle_epi32(s1, 0x1B);                           /* h g f e */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                     /* f e b a = ABEF */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                          /* h g d c = CDGH */
    for (; n; n--, p += 64) {
        __m128i save0 = s0, save1 = s1;
        __m128i m[4];
        for (int i = 0; i < 4; i++)
            m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
        for (int r = 0; r < 16; r++) { /* four rounds per step */
            __m128i w = m[r & 3];
            __m128i wk = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)(K + 4 * r)));
            s1 = _mm_sha256rnds2_epu32(s1, s0, wk);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(wk, 0x0E));
            if (r < 12) {
                /* W[t..t+3] from W[t-16..t-1]: m[r&3] holds W[t-16..t-13]
                 * and is replaced by W[t..t+3] (t = 16 + 4r). */
                __m128i x = _mm_sha256msg1_epu32(m[r & 3], m[(r + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(m[(r + 3) & 3], m[(r + 2) & 3], 4));
                m[r & 3] = _mm_sha256msg2_epu32(x, m[(r + 3) & 3]);
            }
        }
        s0 = _mm_add_epi32(s0, save0);
        s1 = _mm_add_epi32(s1, save1);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);                            /* a b e f */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                           /* g h c d */
    s0 = _mm_blend_epi16(t, s1, 0xF0);                          /* a b c d */
    s1 = _mm_alignr_epi8(s1, t, 8);                             /* e f g h */
    _mm_storeu_si128((__m128i *)h, s0);
    _mm_storeu_si128((__m128i *)(h + 4), s1);
}

static bool cpu_has_sha(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9)))
        return false; /* SSE4.1, SSSE3 */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return false;
    return (b >> 29) & 1; /* SHA */
}

static void blocks(cv_sha256 *s, const uint8_t *p, size_t n)
{
    if (s->use_ni) {
        blocks_ni(s->h, p, n);
        return;
    }
    for (; n; n--, p += 64)
        compress(s->h, p);
}

void cv_sha256_init(cv_sha256 *s)
{
    s->use_ni = cpu_has_sha();
    static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    memcpy(s->h, h0, sizeof h0);
    s->n_bytes = 0;
    s->n_buf = 0;
}

void cv_sha256_update(cv_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->n_bytes += n;
    if (s->n_buf) {
        size_t take = CV_MIN(n, 64 - s->n_buf);
        memcpy(s->buf + s->n_buf, p, take);
        s->n_buf += take;
        p += take;
        n -= take;
        if (s->n_buf < 64)
            return;
        blocks(s, s->buf, 1);
        s->n_buf = 0;
    }
    blocks(s, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(s->buf, p, n);
    s->n_buf = n;
}

void cv_sha256_final(cv_sha256 *s, char hex[65])
{
    uint64_t bits = s->n_bytes * 8;
    uint8_t pad[72] = { 0x80 };
    size_t n_pad = (s->n_buf < 56 ? 56 : 120) - s->n_buf;
    for (int i = 0; i < 8; i++)
        pad[n_pad + i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t keep = s->n_bytes;
    cv_sha256_update(s, pad, n_pad + 8);
    s->n_bytes = keep;
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", s->h[i]);
}
