/*
** A plan file of `llm sensitivity --formats` read back (`llm eval --plan FILE`): per layer and site
** its format spec, checked against the registry and the sites' rules, then bound to the loaded
** model (the same model hash and shape, or refused) as per-layer numerics (analysis/llm_plan_model.h).
*/
#ifndef QS_LLM_PLAN_FILE_H
#define QS_LLM_PLAN_FILE_H

#include <jansson.h>

#include "../../analysis/llm_plan_model.h"
#include "../../analysis/llm_eval_service.h"
#include "../../store/llm_load.h"

#define QS_PLAN_FILE_MAXFMT 32

typedef struct qs_plan_file {
    char path[512];
    char hash[17];                   /* XXH64 of the file's bytes, hex: the configuration's label and key */
    char model_hash[40], model_name[128];
    int layers;
    int shape[5];                    /* model.shape dim, n_head, n_kv_head, head_dim, ffn; 0: not given */
    int scaled;                      /* "scaled_casts" (default 1, llm sensitivity's) */
    int nfmt;
    char spec[QS_PLAN_FILE_MAXFMT][96];
    qs_apply fmt[QS_PLAN_FILE_MAXFMT];
    int *cellfmt;                    /* [layers * QS_SENS_NSITE]: index into fmt, -1 = FP32 */
    const qs_apply **cell;           /* the same as formats (bound) */
    qs_plan_numerics pn;             /* bound to the model */
} qs_plan_file;

/* Whether a JSON object is a plan file ("qscope_plan"). */
int qs_plan_file_is_plan(json_t *j);
/* Read and check path: 0, or an exit code after one line naming the file (1: unreadable, not JSON,
** not a plan, wrong layers or site; 2: an unknown format, or options the site rules refuse). */
int qs_plan_file_read(const char *cmd, const char *path, qs_plan_file *p);
/* The plan for f (its hash and layer count, else refused: exit 1) as per-layer numerics. */
int qs_plan_file_bind(const char *cmd, qs_plan_file *p, const qs_llm_file *f, int scaled);
void qs_plan_file_free(qs_plan_file *p);

/* `llm eval --plan FILE`: the file read into p and a configuration c labelled "plan:NAME@HASH12"
** (keyed by the file's hash); bound to the model once it is loaded (c->plan = p's numerics). */
int qs_plan_file_cfg(const char *cmd, const char *path, qs_plan_file *p, qs_eval_cfg *c);
int qs_plan_file_bind_cfg(const char *cmd, qs_plan_file *p, qs_eval_cfg *c, const qs_llm_file *f, int scaled);

#endif
