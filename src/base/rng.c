/* rng.c — xoshiro256** seeded through splitmix64: fast, 256 bits of state,
 * and the same stream for the same seed on every machine, which is what
 * "identical seed → identical output" and deterministic `synth` rest on. */
#include <math.h>

#include "base/base.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void cv_rng_seed(cv_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t cv_rng_u64(cv_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float cv_rng_f32(cv_rng *r) { return (float)(cv_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float cv_rng_normal(cv_rng *r)
{
    /* Box-Muller; u1 in (0, 1] so the log is finite. */
    double u1 = ((double)(cv_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(cv_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t cv_rng_below(cv_rng *r, uint64_t n)
{
    /* Lemire's nearly-divisionless method would do; rejection is simpler. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = cv_rng_u64(r);
    while (x >= lim);
    return x % n;
}
