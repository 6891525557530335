/*
** The degree-7 Taylor coefficients of 2^f on [-0.5, 0.5] that every exp kernel uses (the scalar one in
** attn.h, the 8- and 16-lane ones in llm_rows.c, the training rows' inline one): one list, so the
** scalar and vector paths cannot drift apart in their bits.
*/
#ifndef QS_EXP2_POLY_H
#define QS_EXP2_POLY_H

#define QS_EXP2_C7 1.5252734e-5f
#define QS_EXP2_C6 1.5403530e-4f
#define QS_EXP2_C5 1.3333558e-3f
#define QS_EXP2_C4 9.6181291e-3f
#define QS_EXP2_C3 5.5504109e-2f
#define QS_EXP2_C2 2.4022651e-1f
#define QS_EXP2_C1 6.9314718e-1f

#endif
