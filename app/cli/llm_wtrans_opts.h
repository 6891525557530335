/*
** `llm eval --config`'s calibration transforms (analysis/llm_wtrans.h): the key smooth=ALPHA[:norm]
** and the weight-format suffixes :gptq[:act-order][:damp=X][:gblock=N] and :awq[:grid=N].
*/
#ifndef QS_LLM_WTRANS_OPTS_H
#define QS_LLM_WTRANS_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "../../analysis/llm_wtrans.h"

/* smooth=VAL: sets t, writes the label's value to lab.  0 or the usage error's exit code. */
int qs_llm_wtrans_smooth(const char *cmd, const char *opt, const char *val, qs_wtrans *t, char *lab, size_t cap);

/* w=VAL: moves the transform suffixes of VAL into t and writes the rest (the format spec) to fmt and
** the suffixes' label (":gptq:act-order", "" without) to suf.  0 or the usage error's exit code. */
int qs_llm_wtrans_wspec(const char *cmd, const char *opt, const char *val, qs_wtrans *t, char *fmt, size_t fcap, char *suf,
                        size_t scap);

/* --calib FILE of `llm eval`: the calibration text read, hashed and tokenized as the evaluation text. */
typedef struct qs_llm_calib_text {
    char *text;
    size_t len;
    int32_t *ids;
    int ntok;
    qs_calib_src src;
} qs_llm_calib_text;
#define QS_CALIB_CHUNKS 8     /* --calib-chunks' default */

struct qs_llm_text_run;
struct qs_eval_cfg;
/* Open path (NULL: none) for the configurations: refused when no configuration has a transform, when
** one has and path is NULL, when it is the evaluation text (same hash), or shorter than one chunk.
** The configurations' labels get ",calib=" and the hash's first 8 digits.  0 or the exit code. */
int qs_llm_calib_open(qs_llm_calib_text *c, const char *cmd, const char *path, int chunks, const struct qs_llm_text_run *t,
                      struct qs_eval_cfg *cfg, int ncfg);
void qs_llm_calib_close(qs_llm_calib_text *c);
/* The header line naming the calibration text (nothing without one). */
void qs_llm_calib_print(const qs_llm_calib_text *c, const char *path);

#endif
