/*
** The decoder's attention over one row's KV cache (kernels/llm_decode.c), vectorised across keys and
** heads with every value summed as the one-key-at-a-time loops sum it (so the same bits): a score is
** the AVX2 dot product's eight FMA lanes reduced (0+4, 2+6) + (1+5, 3+7), times the scale; an output
** element adds p[t] * v[t] in key order from +0 (a multiply, then an add).
*/
#ifndef QS_LLM_DEC_ATTN_H
#define QS_LLM_DEC_ATTN_H

/* One row: q[n_head*hd], keys/values of positions [0, n) at kb/vb (row stride kvd), heads sharing a
** KV head in groups of grp; S scratch of n_head*n floats; out[n_head*hd].  fast = 0: one key at a
** time (the reference the tests compare the vectorised path with). */
void qs_dec_attn_row(float *out, const float *q, const float *kb, const float *vb, int kvd, int n, int n_head, int hd,
                     int grp, float scale, float *S, int fast);

#endif
