/*
** llama.cpp's importance matrix from qscope's forward pass (`qscope llm imatrix`), and a model's
** weights rounded with one (`w=F:imatrix=FILE`).
**
** What is collected is what llama-imatrix's collect_imatrix collects with its default options: for
** every matrix product of a transformer block (names "blk.*"), the sum over tokens of the square of
** each input column and the number of tokens; Q, K and V share their input (the attention RMSNorm's
** output), gate and up theirs (the FFN RMSNorm's), attn_output reads the attention output and
** ffn_down the SwiGLU product.  The output projection is left out unless process_output
** (--process-output), and then only an untied output.weight (llama.cpp names a tied head
** token_embd.weight, which it never collects).  The text is cut as llama-imatrix cuts it: chunks of
** ctx tokens of the text's ids (BOS first when the tokenizer adds it), each chunk's first token
** replaced by BOS, every position counted; chunk_size = ctx, chunk_count = chunks.  Activations are
** the FP32 forward pass's (the capture taps, before any rounding); sums accumulate in double per
** chunk and are stored as float (llama.cpp sums in float: the two agree to rounding, docs/llm.md).
*/
#ifndef QS_LLM_IMATRIX_H
#define QS_LLM_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "llm_eval.h"
#include "../kernels/llm.h"
#include "../store/imatrix.h"

/* The GGUF names of the matrices of a layer, in the order of qs_llm_layer's wq, wk, wv, wo, w_gate,
** w_up, w_down. */
#define QS_LLM_NMAT 7
extern const char *const qs_llm_mat_names[QS_LLM_NMAT];

typedef void (*qs_imat_progress)(void *ctx, int done, int total);

/* Collect over su->nchunks chunks of ids into *out (raw sums and counts; datasets = {dataset} when
** given).  -1 with e set (a non-finite activation names its tensor; "interrupted" on a stop request). */
int qs_llm_imatrix_compute(const qs_llm_model *m, const int32_t *ids, const qs_eval_setup *su, int process_output,
                           const char *dataset, qs_imat_progress prog, void *pctx, qs_imatrix *out, qs_err *e);

/* What rounding with an importance matrix did: weights given importances, and those the file has no
** entry for (rounded without, as llama-quantize does), the first of them named. */
typedef struct qs_imat_use { int used, missing; char first_missing[64]; } qs_imat_use;

/* Round every linear weight of m in place with w (a format that takes importances) and each weight's
** importances from im (llama-quantize's values: qs_imatrix_weights): as qs_llm_quantize_weights, with
** the output projection looked up as output.weight, or token_embd.weight when tied.  An entry whose
** size differs from the weight's columns is refused (llama-quantize refuses it too). */
int qs_llm_quantize_weights_imatrix(qs_llm_model *m, const qs_apply *w, const qs_imatrix *im, qs_imat_use *u, qs_err *e);

#endif
