/*
** The default small model and budget of `qscope train` (issue 26, "Must reach"; measured in
** docs/train.md), and sweeps of runs over recipes and seeds (`qscope train --sweep`): the spec's
** parsing, the run list, and the names the runs are stored under.  The run list is plain data so
** that a distributed sweep (MPI ranks) can hand out its entries.
*/
#ifndef QS_TRAIN_SWEEP_H
#define QS_TRAIN_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "train_loop.h"

/* The default model: 4 layers, dim 128, 4 heads (= KV heads), ffn 512, ctx 128, bytes. */
typedef struct qs_train_shape {
    int layers, dim, heads, kv_heads, ffn;
} qs_train_shape;

/* The default shape and budget (batch 8, ctx 128, 300 steps, lr 3e-3, ...): what `qscope train`
** runs without options and what the pre-training claim is measured on. */
void qs_train_defaults(qs_train_shape *s, qs_train_opts *t);

/* The reduced model and budget of `claims --quick` (2 layers, dim 32, ctx 32, 40 steps). */
void qs_train_quick(qs_train_shape *s, qs_train_opts *t);

#define QS_SWEEP_MAX_RECIPES 16
#define QS_SWEEP_MAX_SEEDS 64

typedef struct qs_train_sweep {
    char recipe[QS_SWEEP_MAX_RECIPES][32];
    int nrecipe;
    uint64_t seed[QS_SWEEP_MAX_SEEDS];
    int nseed;
} qs_train_sweep;

/* "default" (recipes bf16,hif4,mxfp4,nvfp4,mxfp8; seeds 1,2,3) or "recipes=A,B,...,seeds=1,2,3"
** (either key may come first; a missing key takes the default's list; a word after a comma that
** has no '=' belongs to the list before it).  Recipes are checked against the presets, duplicates
** refused.  Errors name the part at fault. */
int qs_train_sweep_parse(const char *spec, qs_train_sweep *s, qs_err *e);

/* The runs: nseed x nrecipe, seed-major (all recipes of the first seed first, so that a sweep cut
** short still has complete pairs to compare). */
size_t qs_train_sweep_count(const qs_train_sweep *s);
void qs_train_sweep_at(const qs_train_sweep *s, size_t i, const char **recipe, uint64_t *seed);

/* The sweep's name for a configuration (everything but recipe and seed): "default" when the
** configuration is the default one, else "sweep-" and 8 hex digits of its hash, so the same
** configuration always finds its stored runs again.  cfg: qs_train_config_key's text. */
void qs_train_sweep_name(const char *cfg, char *buf, size_t cap);
/* A run's name in a sweep: "<sweep>-<recipe>-s<seed>". */
void qs_train_sweep_run_name(const char *sweep, const char *recipe, uint64_t seed, char *buf, size_t cap);

/* A canonical text of a configuration: shape, options (not recipe or seed), tokenizer and texts. */
void qs_train_config_key(const qs_train_shape *s, const qs_train_opts *t, const char *tokenizer,
                         const char *const *text, int ntext, const char *val_text, char *buf, size_t cap);
/* The key of the default configuration (default shape and options, bytes, the default texts). */
void qs_train_default_key(char *buf, size_t cap);

/* make data's texts: data/text/ *.txt except persuasion.txt, in name order, into paths[max][300];
** *n of them (0 when the directory is not there). */
#define QS_TRAIN_TEXT_DIR "data/text"
void qs_train_default_texts(char (*paths)[300], int max, int *n);

#endif
