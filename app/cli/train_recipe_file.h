/*
** `qscope train --recipe-file FILE` (docs/train.md "Recipe files"): a JSON object naming a base
** preset and the formats of the six operand slots, {"base": "nvfp4", "fwd.x": "mxfp4", "dgrad.dy":
** "none", ...}, expanded into what `--recipe BASE --op fwd.x=mxfp4 ...` would give.  Training runs
** one recipe for every layer (kernels/llm_recipe.h), so a per-layer plan of `llm sensitivity
** --formats` is refused with a message saying so.
*/
#ifndef QS_TRAIN_RECIPE_FILE_H
#define QS_TRAIN_RECIPE_FILE_H

typedef struct qs_recipe_file {
    char base[32];              /* the preset ("" = none: fp32) */
    char op[6][160];            /* "OPERAND=SPEC", as --op */
    int nop;
} qs_recipe_file;

/* 0, or an exit code after one line naming the file (1: unreadable, not JSON, not an object; 2: a
** plan file, an unknown key, operand or format, a value that is not a string). */
int qs_recipe_file_read(const char *cmd, const char *path, qs_recipe_file *rf);

#endif
