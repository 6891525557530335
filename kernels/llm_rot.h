/*
** Transforms of a Llama model that leave its FP32 function unchanged but move outliers away from the
** quantizers (docs/llm.md, "Rotations and the random Hadamard transform"):
**
** rot (QuaRot, Ashkboos et al. 2024; SpinQuant's random start, Liu et al. 2024), a reconstruction:
**   - every RMSNorm weight folded into the linear layers reading its output (Q/K/V, gate/up, the output
**     head; the norm weights become 1), so the norms commute with an orthogonal Q of the residual;
**   - the residual stream rotated by Q: token embedding rows x Q, matrices reading the stream (Q/K/V,
**     gate/up, head) W Q on their input side, matrices writing it (o_proj, down) Q^T W on their output
**     side.  Q is a Hadamard matrix (hadamard.h; random signs with a seed) or, rot=random, the Q of
**     the QR of a Gaussian matrix (positive diagonal of R: Haar-distributed);
**   - per head, V rotated on its output side and o_proj on its input side by a head_dim rotation
**     (offline, exact: attention mixes V rows per head);
**   - the online Hadamard before the down-projection: its input rotated at run time by H_ffn, W_down
**     on its input side to match.
**   Not reconstructed: QuaRot's online Hadamard of Q/K after RoPE (K cache) and across heads before
**   o_proj, and SpinQuant's learned rotations.
** rht (the NVFP4 training recipe's 16-point random Hadamard transform, qs_llm_rht16, applied at
**   inference): every linear layer's weight rows transformed along the input dimension (folded,
**   before weight quantization) and each input row transformed at run time (before activation
**   quantization): both operands by the same block-diagonal orthogonal M, so the product is unchanged.
** The weights are transformed before quantization (w=F rounds the transformed weights); activations
** are rounded after the online transforms.
*/
#ifndef QS_LLM_ROT_H
#define QS_LLM_ROT_H

#include <stddef.h>
#include <stdint.h>

#include "hadamard.h"
#include "llm.h"

typedef enum qs_rot_kind { QS_ROT_NONE = 0, QS_ROT_HADAMARD, QS_ROT_RANDOM } qs_rot_kind;

typedef struct qs_llm_xspec {
    qs_rot_kind rot;
    uint64_t rot_seed;        /* hadamard: 0 = no random signs; random: the Gaussian's seed */
    int down;                 /* rot: the online Hadamard before the down-projection */
    int vo;                   /* rot: the per-head rotation of V and o_proj */
    int rht;                  /* 0, or 16: the blockwise random Hadamard transform */
    uint64_t rht_seed;        /* its signs' seed */
} qs_llm_xspec;

/* Parse the value of a rot= or rht= key into x (the other key's fields untouched):
**   rot=hadamard[:seed=N][:down=0|1][:vo=0|1]   rot=random[:seed=N][:down=0|1][:vo=0|1]   rot=none
**   rht=16[:seed=N]                             rht=none
** -1 with a one-line message otherwise. */
int qs_llm_xspec_parse(qs_llm_xspec *x, const char *key, const char *val, qs_err *e);
/* Whether x asks for any transform. */
static inline int qs_llm_xspec_any(const qs_llm_xspec *x) { return x->rot != QS_ROT_NONE || x->rht; }
/* The canonical text of key ("rot" or "rht") for labels and cache keys ("" when off). */
void qs_llm_xspec_text(const qs_llm_xspec *x, const char *key, char *buf, size_t n);

/* The run-time part of a transform (qs_llm_numerics.online). */
struct qs_llm_online {
    qs_hadamard down;         /* H_ffn before the down-projection (n = 0: none) */
    int rht;
    uint64_t rht_seed;
};

/* dst (allocated here, untied, with src's biases) = src transformed by x; *on: the online part that
** forward passes with dst must run (free with qs_llm_online_free).  Refuses (-1, one line) a width no
** Hadamard construction covers. */
int qs_llm_transform(qs_llm_model *dst, const qs_llm_model *src, const qs_llm_xspec *x, qs_llm_online **on, qs_err *e);
void qs_llm_online_free(qs_llm_online *on);
/* Round dst's weights with w as qs_llm_quantize_weights does src's: when src ties its embedding to the
** head (the rounded head then also serves the lookup), dst's own token embedding is rounded too. */
int qs_llm_transform_quantize(qs_llm_model *dst, const qs_llm_model *src, const qs_apply *w, int scaled, qs_err *e);

/* In place, before the activation rounding of a linear layer's input rows x[rows][cols] at site s
** (the output head's input as QS_SITE_ATTN_IN): H_ffn at QS_SITE_FFN_DOWN_IN, then the RHT. */
int qs_llm_online_rows(const qs_llm_online *on, qs_llm_site s, float *x, int rows, int cols, qs_err *e);

#endif
