/*
** Counter-based uniform draws for stochastic rounding (sr.h).
**
** SplitMix64 (Steele, Lea, Flood 2014; the finaliser of java.util.SplittableRandom): the seed is
** mixed into the start of a Weyl sequence and the index-th step is mixed again, so the draw is a
** pure function of (seed, index) -- element i of a call uses index0 + i, and the result does not
** depend on how a tensor is split into calls or threads.  53 bits, so u is uniform on the doubles
** k * 2^-53 in [0, 1), and "round up when u < fraction" rounds up with probability exactly equal to
** the fraction for every fraction with 53 or fewer bits (all of them, for float32 inputs).
*/
#include "sr.h"

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double qs_sr_uniform(uint64_t seed, uint64_t index)
{
    const uint64_t gamma = 0x9e3779b97f4a7c15ULL;        /* 2^64 / golden ratio, odd */
    uint64_t z = mix64(mix64(seed ^ 0x5851f42d4c957f2dULL) + (index + 1) * gamma);
    return (double)(z >> 11) * 0x1.0p-53;
}
