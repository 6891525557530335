/*
** Counter-based uniform draws for stochastic rounding (kernels/sr.c): every SR path of the formats,
** the minifloat casts and the LLM sampler take u = qs_sr_uniform(seed, index0 + i) for element i.
*/
#ifndef QS_SR_H
#define QS_SR_H

#include <stdint.h>

/* Uniform in [0,1): a pure function of (seed, index). */
double qs_sr_uniform(uint64_t seed, uint64_t index);

#endif
