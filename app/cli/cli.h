/*
** The command-line front end: the command table, global options and shared output helpers.
**
** Conventions (clig.dev): data on stdout, messages on stderr; exit 0 success, 1 runtime error,
** 2 usage error; --json on every listing command; colour only on a terminal, never with NO_COLOR.
*/
#ifndef QS_CLI_H
#define QS_CLI_H

#include <stdio.h>

#include "../../kernels/qs_clock.h"   /* qs_now_s: timing a command */
#include "../../kernels/qs_err.h"
#include "../../store/db.h"
#include "../../store/text_escape.h"

enum { QS_EXIT_OK = 0, QS_EXIT_ERR = 1, QS_EXIT_USAGE = 2 };

typedef struct qs_cli {
    const char *db_path;   /* --db, $QSCOPE_DB, or ./qscope.db */
    int color;             /* stdout is a terminal and NO_COLOR is unset */
    int argc;              /* the full command line, recorded with results */
    char **argv;
} qs_cli;

/* A subcommand (`llm eval`, `sim grpo`): its row in its command's table. */
typedef struct qs_subcommand {
    const char *name;
    const char *help;      /* its paragraph in `qscope help CMD`; continuation lines indented 12 */
    int (*run)(qs_cli *cli, int argc, char **argv);  /* argv[0] is the subcommand's name */
    int sharded;           /* splits its work over the ranks of `mpirun -np N` (par.h) */
    const char *args;      /* synopsis after `qscope CMD SUB`, for `qscope help CMD SUB` */
    const char *options;   /* the options this subcommand takes, for `qscope help CMD SUB` */
} qs_subcommand;

typedef struct qs_command {
    const char *name;
    const char *args;      /* synopsis after the name (after the subcommand, for one with subs) */
    const char *summary;   /* one line for `qscope --help` */
    const char *help;      /* full text for `qscope help NAME` (before the subcommands' paragraphs) */
    int (*run)(qs_cli *cli, int argc, char **argv);  /* argv[0] is the command name; NULL with subs */
    const qs_subcommand *subs;   /* the subcommands (a NULL name ends them), or NULL */
    const char *options;   /* with subs: the options, after the subcommands' paragraphs */
    int sharded;           /* splits its work over the ranks of `mpirun -np N` (par.h) */
} qs_command;

extern const qs_command qs_commands[];
const qs_command *qs_command_find(const char *name);
/* The row of argv[1] in c's subcommands; NULL when c has none, argv[1] is missing or unknown. */
const qs_subcommand *qs_subcommand_find(const qs_command *c, int argc, char **argv);
/* Run the command (argv[0] is its name) through its run or its subcommand table; a missing or
** unknown subcommand is a usage error naming the ones there are. */
int qs_command_run(qs_cli *cli, const qs_command *c, int argc, char **argv);
/* `qscope help NAME` of a command: synopsis, summary, help, subcommands, options. */
void qs_command_help(FILE *f, const qs_command *c);
/* `qscope help NAME SUB` of a subcommand: its synopsis, what it does and the options it takes. */
void qs_subcommand_help(FILE *f, const qs_command *c, const qs_subcommand *s);
/* The row of the subcommand called name; NULL when c has none of that name. */
const qs_subcommand *qs_subcommand_named(const qs_command *c, const char *name);
/* Whether this command line shards its work over MPI ranks. */
int qs_command_sharded(const qs_command *c, int argc, char **argv);

extern const qs_subcommand qs_llm_subcommands[], qs_sim_subcommands[];

/* Open the database named by the CLI, printing the error on failure. */
qs_db *qs_cli_open_db(qs_cli *cli);

/* Print "qscope: MESSAGE" to stderr; returns code. */
int qs_cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int qs_cli_err(int code, const qs_err *e);
/* Usage error for a command: message + "see `qscope help CMD`"; returns 2. */
int qs_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An integer option in lo..hi; a usage error (QS_EXIT_USAGE, message printed) otherwise. */
int qs_cli_parse_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);

/* qs_esc, qs_esc_md: outside text made safe to print (store/text_escape.h). */
/* Write n bytes of running text from outside (a model's generated text) to f: newlines and tabs
** as they are, every other control character and invalid UTF-8 escaped as qs_esc does. */
void qs_put_text(FILE *f, const char *s, size_t n);
/* Terminal columns of printable UTF-8 text (one per character): for padding table columns. */
int qs_text_cols(const char *s);
/* Write s as one CSV field: escaped as qs_esc, quoted (with "" inside) when it holds , or ". */
void qs_csv_field(FILE *f, const char *s);

/* Colour helpers: SGR sequences or "" when colour is off. */
const char *qs_c_bold(const qs_cli *c);
const char *qs_c_dim(const qs_cli *c);
const char *qs_c_head(const qs_cli *c);
const char *qs_c_warn(const qs_cli *c);
const char *qs_c_off(const qs_cli *c);

/* A fresh private directory $TMPDIR/qscope-TAG-XXXXXX (/tmp without TMPDIR) for scratch files of
** benchmarks; out holds its path.  Returns 0, or -1 when it cannot be made. */
int qs_cli_tempdir(const char *tag, char *out, size_t cap);

/* Human-readable byte size ("1.5 MiB"). */
void qs_fmt_bytes(double n, char *buf, size_t cap);
/* %g-like number with `sig` significant digits, NaN/Inf spelled out. */
void qs_fmt_num(double x, int sig, char *buf, size_t cap);

/* Option parsing helpers: parse unsigned / double / seed; return -1 on garbage. */
int qs_parse_u64(const char *s, unsigned long long *out);
int qs_parse_f64(const char *s, double *out);

/* Per-command entry points. */
int qs_cmd_import(qs_cli *, int, char **);
int qs_cmd_ls(qs_cli *, int, char **);
int qs_cmd_show(qs_cli *, int, char **);
int qs_cmd_rm(qs_cli *, int, char **);
int qs_cmd_gen(qs_cli *, int, char **);
int qs_cmd_gen_model(qs_cli *, int, char **);   /* `gen model` (cmd_gen_model.c) */
int qs_cmd_info(qs_cli *, int, char **);
int qs_cmd_demo(qs_cli *, int, char **);
int qs_cmd_check(qs_cli *, int, char **);
int qs_cmd_schema(qs_cli *, int, char **);
int qs_cmd_bench(qs_cli *, int, char **);
int qs_cmd_quant(qs_cli *, int, char **);
int qs_cmd_formats(qs_cli *, int, char **);
int qs_cmd_explain(qs_cli *, int, char **);
int qs_cmd_plot(qs_cli *, int, char **);
int qs_cmd_analyze(qs_cli *, int, char **);
int qs_cmd_report(qs_cli *, int, char **);
int qs_cmd_claims(qs_cli *, int, char **);
int qs_cmd_llm_text(qs_cli *, int, char **);
int qs_cmd_llm_imatrix(qs_cli *, int, char **);
int qs_cmd_llm_eval(qs_cli *, int, char **);
int qs_cmd_llm_tokenize(qs_cli *, int, char **);
/* --prompt TEXT in SmolLM2's ChatML template with its default system message (malloc'ed; NULL: out of memory). */
char *qs_llm_chat_text(const char *text);
int qs_cmd_llm_sens(qs_cli *, int, char **);
int qs_cmd_train(qs_cli *, int, char **);
/* Read an evaluation text (bytes and their xxh3-128 hash), and tokenize it as `llm eval` does: with
** BOS first when the vocabulary adds it (app/cli/cmd_llm_eval.c). */
struct qs_llm_file;
/* One format of `llm eval`/`llm sensitivity` (app/cli/cmd_llm_eval.c): blocks along the input channels only. */
struct qs_apply;
int qs_llm_parse_fmt(const char *cmd, const char *spec, struct qs_apply *out);
/* Refuse (usage error naming what+spec) the options of a parsed llm format ap that its site cannot
** honour: scale=none anywhere; scale=tensor|col and gran=tensor when `rows` (the sites' name, NULL for
** weights) are rounded a token at a time.  0 or the exit code (app/cli/cmd_llm_eval.c). */
int qs_llm_fmt_site_check(const char *cmd, const char *what, const char *spec, const struct qs_apply *ap, const char *rows);
/* A configuration w=F,a=F,kv=F,resq=MODE as `llm eval --config` takes it (also `rl grpo --rollout`); usage
** errors name cmd and opt.  Returns 0 or the exit code (analysis/llm_eval_service.h's qs_eval_cfg). */
struct qs_eval_cfg;
int qs_llm_parse_config(const char *cmd, const char *opt, const char *spec, struct qs_eval_cfg *c);
/* The model's name for a terminal line: its own name (else the architecture), escaped as qs_esc. */
const char *qs_llm_title(const struct qs_llm_file *f);
/* `llm bench`'s eval case (app/cli/cmd_llm_eval.c): tokens/s of `llm eval` for the reference and cfg (a
** struct qs_eval_variant, or NULL) over synthetic ids, against OpenBLAS SGEMM measured in the same run. */
struct qs_llm_model;
struct qs_eval_variant;
int qs_llm_eval_bench(const struct qs_llm_model *ref, const struct qs_eval_variant *cfg, const char *label, int ctx,
                      int chunks, qs_err *e);
/* Re-execute with a working OpenBLAS core when it fell back to Prescott on an AVX2 CPU (app/cli/blas_core.c). */
void qs_blas_core_fix(int argc, char **argv);   /* app/cli/blas_core.c: before any BLAS call */
int qs_cmd_tui(qs_cli *, int, char **);

/* Print a value the way `quant` does: %.9g, and nan / inf / -inf. */
void qs_print_value(FILE *f, float v);

#endif
