/*
** `qscope train --recipe-file FILE` (docs/train.md "Recipe files"): a JSON object naming a base
** preset and the formats of the six operand slots, {"base": "nvfp4", "fwd.x": "mxfp4", "dgrad.dy":
** "none", ...}, expanded into what `--recipe BASE --op fwd.x=mxfp4 ...` would give.  Training runs
** A per-layer plan of `llm sensitivity --formats` is not read here: rf->plan says it is one, and the
** caller reads it (train_plan.h).
*/
#ifndef QS_TRAIN_RECIPE_FILE_H
#define QS_TRAIN_RECIPE_FILE_H

typedef struct qs_recipe_file {
    char base[32];              /* the preset ("" = none: fp32) */
    char op[6][160];            /* "OPERAND=SPEC", as --op */
    int nop;
    int plan;                   /* 1: the file is a plan (qscope_plan), nothing else filled */
} qs_recipe_file;

/* 0, or an exit code after one line naming the file (1: unreadable, not JSON, not an object; 2: a
** unknown key, operand or format, a value that is not a string). */
int qs_recipe_file_read(const char *cmd, const char *path, qs_recipe_file *rf);

#endif
