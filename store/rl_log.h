/*
** RL per-token logs in the mmlog v1 schema (spec ais-rl.md §4.2): a streaming parser for the CSV
** (one row per token) and JSONL (one line per sequence) encodings, and the importer that writes a
** run into rl_run / rl_token / rl_seq in one transaction.
**
** The parser works on a whole buffer (the importer maps the file) and never allocates more than a
** line's worth of arrays.  Numbers go through a hand-written decimal scanner (exact fast path for
** up to 15 significant digits and |exponent| <= 22, strtod otherwise); jansson is used only for the
** optional metadata header line {"schema":"mmlog-v1",...}.
**
** Rules (a violation stops the parse with "line N: what is wrong"):
**   - required: step (int >= 0), seq_id (string or int), tok_idx (CSV; JSONL uses array position),
**     lp_rollout, lp_train (finite, <= 1e-6: log-probs);
**   - optional: group_id, adv, reward, entropy (finite, >= 0), mask (0/1, default 1), token_id;
**     unknown CSV columns and JSON keys are ignored;
**   - rows of a sequence are contiguous with tok_idx strictly increasing; a (step, seq_id) seen
**     again later, a repeated tok_idx or a repeated JSON key is an error;
**   - every line ends with '\n' (a missing final newline = truncated last line); a line is at most
**     QS_RL_MAX_LINE bytes.
** Sequences get per-step ordinals (0, 1, ... in order of appearance): the `seq` column; groups get
** per-run ordinals: the `grp` column.  The original ids are kept in rl_seq.
*/
#ifndef QS_RL_LOG_H
#define QS_RL_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"
#include "db.h"

#define QS_RL_MAX_LINE (32u << 20)    /* 32 MiB */
#define QS_RL_LP_TOL 1e-6             /* log-probs up to this are accepted (rounding) */

enum { QS_RL_CSV = 1, QS_RL_JSONL = 2 };

typedef struct qs_rl_row {
    int64_t step, seq, pos;
    int64_t token_id;                 /* -1: absent */
    int64_t grp;                      /* -1: absent */
    double lp_rollout, lp_train;
    double adv, reward, entropy;      /* NaN: absent */
    int mask;
} qs_rl_row;

typedef struct qs_rl_sink {
    void *ctx;
    /* a batch of token rows, in file order */
    int (*rows)(void *ctx, const qs_rl_row *r, size_t n, qs_err *e);
    /* a new sequence: its per-step ordinal and original ids (group_id NULL when absent) */
    int (*seq)(void *ctx, int64_t step, int64_t seq, const char *seq_id, const char *group_id, qs_err *e);
} qs_rl_sink;

typedef struct qs_rl_parse_info {
    int format;                       /* QS_RL_CSV or QS_RL_JSONL */
    uint64_t lines, tokens, seqs, steps, groups;
    uint64_t n_far;                   /* tokens with |lp_train - lp_rollout| > 20 (warned, clamped later) */
    uint64_t far_line;                /* first such line */
    char *header_json;                /* malloc'd metadata header line (JSONL), or NULL */
} qs_rl_parse_info;

/* Parse a whole log held in memory.  sink may have NULL callbacks (validation only). */
int qs_rl_parse(const char *data, size_t n, const qs_rl_sink *sink, qs_rl_parse_info *info, qs_err *e);
void qs_rl_parse_info_free(qs_rl_parse_info *info);

/* Scan one decimal number from [p, end): returns 0 and sets *out and *next; 1 for nan/inf spellings
** (*out set to the non-finite value); -1 when there is no number. Exposed for the unit tests. */
int qs_rl_scan_double(const char *p, const char *end, double *out, const char **next);

typedef struct qs_rl_import_opts {
    const char *run;                  /* run name (default: file name without extension) */
    const char *label;                /* free text, may be NULL */
    int replace;                      /* replace a run of the same name */
    int quiet;                        /* no warnings on stderr */
} qs_rl_import_opts;

typedef struct qs_rl_import_result {
    int64_t run_id;
    char run[256];
    qs_rl_parse_info info;            /* header_json freed */
    uint64_t bytes;
    double seconds;
} qs_rl_import_result;

/* Import FILE as one run; one transaction, nothing stored on error ("FILE: line N: ..."). */
int qs_rl_import(qs_db *db, const char *path, const qs_rl_import_opts *o, qs_rl_import_result *r, qs_err *e);

/* Writing runs from other producers (simulations): create the rl_run row (replacing a run of that
** name when replace, else failing), then add token rows.  The caller owns the transaction. */
int qs_rl_run_create(qs_db *db, const char *name, const char *label, const char *source, const char *metadata_json,
                     int replace, int64_t *run_id, qs_err *e);
typedef struct qs_rl_writer qs_rl_writer;
qs_rl_writer *qs_rl_writer_open(qs_db *db, int64_t run_id, qs_err *e);
int qs_rl_writer_rows(qs_rl_writer *w, const qs_rl_row *rows, size_t n, qs_err *e);
void qs_rl_writer_close(qs_rl_writer *w);

/* Delete a run and everything of it.  0 ok (also when absent: *found = 0). */
int qs_rl_run_delete(qs_db *db, const char *name, int *found, qs_err *e);

#endif
