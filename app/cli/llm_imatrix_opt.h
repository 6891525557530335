/*
** `:imatrix=FILE`, the importance-matrix option of a weight format (llm_imatrix_opt.c).
*/
#ifndef QS_LLM_IMATRIX_OPT_H
#define QS_LLM_IMATRIX_OPT_H

#include <stddef.h>

#include "../../analysis/llm_eval_service.h"
#include "../../kernels/format.h"
#include "../../store/imatrix.h"

/* Cut ":imatrix=FILE" off spec (in place): FILE, or NULL when the spec has none. */
char *qs_imatrix_opt_split(char *spec);
/* Refuse a format without importances (usage error) or read FILE (its errors name it): 0 or an exit code. */
int qs_imatrix_opt_load(const char *cmd, const char *what, const char *path, const qs_format *f, qs_imatrix **out,
                        char hash[33]);
/* Append ":imatrix=BASENAME@HASH8" to the label in buf. */
void qs_imatrix_opt_label(const char *path, const char *hash, char *buf, size_t cap);
/* For --config's w=: load into c (c->w parsed already) and extend the weight's label lab. */
int qs_imatrix_opt_config(const char *cmd, const char *opt, const char *path, qs_eval_cfg *c, char *lab, size_t cap);
/* One note per configuration whose importance matrix lacked some of the model's weights. */
void qs_imatrix_opt_notes(const char *cmd, const qs_eval_cfg *cfg, int n);

#endif
