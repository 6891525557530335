/*
** The workbench (`qscope tui`, or `qscope` on a terminal): an ncurses application over the
** database.  Files, by concept:
**
**   tui.c          entry point, main loop, layout (title, status line, key-hint bar), the `:`
**                  command line, search, mouse, resize, the too-small message: the generic code,
**                  which reaches the views only through their table
**   tui_view.c/.h  the views as data: a table of operations (draw, key, rows, row_text, open,
**                  close, ...) with one row per view, each view's own state
**   tui_ui.c       the small generic API the views call: messages, the view stack, the prompt,
**                  list cursors, shared drawing helpers
**   tui_keys.c     the one key table: keys -> actions, with the help screen, each view's key-hint
**                  bar and the title's view strip generated from it
**   tui_data.c     everything read from the database (tensors, stored metrics, histograms, blocks,
**                  RL runs and their per-step diagnostics, kernel results)
**   tui_worker.c   the worker thread: analyses and `:` commands run there, with progress and
**                  cancellation; the interface never waits for them
**   tui_tensors.c, tui_formats.c, tui_hist.c, tui_rl.c, tui_kernels.c, tui_output.c, tui_help.c
**                  one view each (Formats with a Pareto plot under the table)
**   tui_model.c    the Model view: stored `llm eval` results and the KL distribution of a config
**   tui_train.c    the Training view: stored training runs, their loss curves and operand statistics
**   tui_blocks.c   the Blocks view (block-error heatmap) and the Block inspector
**   tui_popups.c   the two pop-ups: `f` choose formats, `o` format options
**   tui_plot.c     drawing a plot-model figure into a window region (colours mapped to curses
**                  pairs), and PNG export
**   tui_args.c     splitting a `:` command line into words (fuzzed: tests/fuzz/fuzz_tui_args.c)
**   tui_bench.c    `qscope bench tui`: first-frame and redraw timings on a 10,000-tensor database
**
** Threading: only the main thread touches ncurses and the main database connection.  The worker
** has its own connection; it communicates through tui_job (mutex-protected) and a self-pipe that
** wakes the main loop when a job ends.  Jobs: analyses of missing results, `:` commands (a child
** process), and the RL diagnostics (they read every token).
*/
#ifndef QS_TUI_H
#define QS_TUI_H

#include <pthread.h>
#include <stdint.h>

#include "../../analysis/metrics.h"
#include "../../analysis/plot.h"
#include "../../kernels/format_apply.h"
#include "../../store/db.h"
#include "../cli/cli.h"

#define TUI_MAX_FMTS 32

/*
** The workbench's views, one line each (after tig's VIEW_INFO): the id, the row of operations the
** view's file defines (tui_view_<name>), the digit key that opens it (0: none; reached by drilling in or
** by its own key), its name in the title's view strip (and a shorter one), and the help line of
** that key.  The enum, the view table (tui_view.c) and the keys that open views (tui_keys.c) are
** generated from it; the title's strip lists keyed views in this order.  Adding a view is adding
** its file and one line here.  The first view is the one the workbench opens on.
*/
#define TUI_VIEW_LIST(X, Y) \
    X(TENSORS, tensors, 1, "Tensors", "Tens", "Tensors view") \
    X(FORMATS, formats, 2, "Formats", "Fmt", "Formats view") \
    X(HIST, hist, 3, "Hist", "Hist", "Histogram view") \
    X(BLOCKS, blocks, 4, "Blocks", "Blk", "Blocks view") \
    Y(INSPECT, inspect) \
    X(RL, rl, 5, "RL", "RL", "RL runs view") \
    X(KERNELS, kernels, 6, "Kernels", "Kern", "Kernels view (MSD and attention results)") \
    X(OUTPUT, output, 7, "Output", "Out", "Output of the last command") \
    X(MODEL, model, 8, "Model", "Model", "Model view (stored llm eval results: perplexity, KL)") \
    X(TRAIN, train, 9, "Training", "Train", "Training view (stored training runs: loss curves, operand statistics)") \
    Y(HELP, help)

typedef enum tui_view_id {
#define TUI_VIEW_ENUM(id, ...) TV_##id,
    TUI_VIEW_LIST(TUI_VIEW_ENUM, TUI_VIEW_ENUM)
#undef TUI_VIEW_ENUM
    TV_COUNT
} tui_view_id;

/* ---- data (tui_data.c) ---- */
typedef struct tui_tensor {
    int64_t id;
    char *name, *hash, *dtype;
    char shape[48];
    uint64_t numel, nbytes, rows, cols;
    double absmax, kurtosis, outlier;  /* NaN when no statistics */
    int nresults;                 /* stored metrics results (format x options) of this qscope version */
} tui_tensor;

typedef struct tui_fmt {          /* one chosen format entry (with its options) */
    qs_apply a;
    char label[96];
    char *opts;                   /* canonical options JSON (the result key) */
} tui_fmt;

typedef struct tui_metrics {      /* a stored "metrics" result, or have = 0 */
    int have;
    int no_blocks;                /* a block format stored without its per-block data (by `report`) */
    double bits, eff_bits, sqnr, max_rel, under, clip, rmse, nonfinite;
    char src[32];                 /* main error source, short (analysis/err_source.h) */
} tui_metrics;

typedef struct tui_blocks {       /* a stored "blocks" result and its arrays */
    int have;
    uint64_t nblocks, rows, cols;
    int block, axis;
    float *rmse, *absmax, *ratio;
    uint8_t *scale;               /* may be NULL */
    double lo, hi;                /* log10 range of the finite positive rmse */
} tui_blocks;

typedef struct tui_run {          /* an RL run */
    int64_t id;
    char *name, *label;
    int64_t tokens, steps, seqs;
    double first, last;           /* the first and last logged step (steps counts the logged ones) */
    int per_prompt;               /* an `llm score` run: its "steps" are prompts (analysis/rl_xaxis.h) */
} tui_run;

typedef struct tui_rlc {          /* a run's per-step diagnostics and counts (computed by the worker) */
    int64_t run;
    double *x, *y[8];             /* steps; diagnostic m per step */
    size_t n;
    int64_t tokens, steps, seqs;
} tui_rlc;

typedef struct tui_kres {         /* a stored result of kind trajectory / msd / attn / resq */
    int64_t id;
    char kind[16];
    char *format, *hash, *created;
    char *what;                   /* the data's "title", else the options' "run"/"set", else its "ylabel" */
} tui_kres;

/* ---- worker (tui_worker.c) ---- */
typedef enum tui_job_kind { TJ_NONE = 0, TJ_ANALYZE, TJ_COMMAND, TJ_RL } tui_job_kind;

typedef struct tui_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int started, quit;
    /* request (main -> worker) */
    tui_job_kind kind;            /* TJ_NONE = idle */
    char *db_path;
    char *tensor;                 /* TJ_ANALYZE: tensor name */
    qs_apply apps[TUI_MAX_FMTS];  /* TJ_ANALYZE: formats to compute */
    int napps, force;
    char **argv;                  /* TJ_COMMAND: qscope arguments (NULL-terminated) */
    int64_t *rl_runs;             /* TJ_RL: runs to compute */
    tui_rlc *rl_out;              /* TJ_RL: their diagnostics (handed to the main thread) */
    int rl_n, rl_done;
    /* state (worker -> main) */
    volatile int busy, cancel;
    uint64_t done, total;         /* progress of the current step */
    int step, nsteps;
    char label[160];
    char *output;                 /* TJ_COMMAND: captured stdout+stderr */
    size_t output_len;
    int exit_code;
    char msg[512];                /* the last job's outcome */
    int finished;                 /* set when a job ends; cleared by the main thread */
    int wake_fd[2];               /* self-pipe: the worker writes a byte when a job ends */
    pid_t child;
} tui_job;

/* ---- the application ---- */
typedef struct tui_list {         /* cursor and scroll of a list */
    int cur, top;
} tui_list;

/* The application: the screen, the view stack, and what several views show (read by tui_data.c:
** the tensors and the current one, the chosen formats with their results and the current one, the
** blocks, the RL runs, the stored results, the last command's output).  What only one view keeps
** is that view's own state (vstate, tui_view.h). */
typedef struct tui {
    qs_cli *cli;
    qs_db *db;
    char *db_path;
    int color, ascii, mouse;      /* colour in use; ASCII-only glyphs; mouse reporting */
    int W, H;                     /* terminal size */
    tui_view_id view, stack[16];
    int depth;
    int quit, dirty;
    /* tensors */
    tui_tensor *t;
    size_t nt;
    size_t *vis;                  /* indices of the shown (filtered, sorted) tensors */
    size_t nvis;
    int sort_key, sort_desc;      /* 0 name, 1 size, 2 absmax, 3 kurtosis, 4 outliers */
    char filter[128], search[128];
    tui_list lt, lf;              /* the current tensor and the current format (row of the Formats view) */
    /* formats */
    tui_fmt fmts[TUI_MAX_FMTS];
    int nfmts;
    tui_metrics met[TUI_MAX_FMTS];
    int met_for;                  /* tensor index the metrics are loaded for (-1 none) */
    int fsort;                    /* formats view sort column (0 = as chosen) */
    int fsort_desc;
    int *forder;                  /* row order of the formats view */
    int fauto, fauto_for;         /* the cursor follows the best format of tensor fauto_for until moved */
    /* blocks */
    tui_blocks blk;
    int blk_for, blk_fmt;         /* tensor / format the blocks are loaded for */
    /* RL / kernels */
    tui_run *runs;
    size_t nruns;
    tui_kres *kres;
    size_t nkres;
    tui_rlc *rlc;
    int nrlc;                     /* per-run diagnostics computed so far (cleared when runs reload) */
    int runs_loaded;              /* the RL run list is read when the RL view is first shown */
    int rl_stopped;               /* the last RL computation was cancelled or failed: wait for r */
    int bench_rl_sync;            /* bench: compute RL diagnostics on the main thread (no worker) */
    /* output of the last `:` command */
    char *out;
    size_t out_len;
    char out_title[200];
    /* the figure on screen (for `e` export) and where it came from */
    qs_figure *fig;
    char fig_what[200];
    char fig_hash[48];            /* the figure's data hash when it is not the current tensor's (Model view) */
    /* status */
    char msg[400];
    int msg_err;
    tui_job job;
    int bench;                    /* running headless for `bench tui` */
    /* mouse: the list drawn last and where its first row is */
    tui_list *click_list;
    int click_y0, click_n;
    int auto_analyze;             /* compute missing results when a tensor's formats are shown */
    int64_t data_version;         /* PRAGMA data_version when the database was last read */
    double next_poll;             /* monotonic seconds of the next data_version check */
    /* parsed stored histograms of the current tensor, [format][rel, abs, ulp, value]; state 0 not
    ** read yet, 1 present, -1 absent; cleared whenever the metrics are reloaded */
    qs_hist hc[TUI_MAX_FMTS][4];
    signed char hc_state[TUI_MAX_FMTS][4];
    void *vstate[TV_COUNT];       /* each view's own state (tui_view.h) */
    void (*redraw)(struct tui *T);   /* the whole screen (a prompt redraws after a resize) */
} tui;

/* tui.c */
void tui_draw(tui *T);
int tui_init_app(tui *T, qs_cli *cli, const char *db_path, const char *fmt_list, qs_err *e);
void tui_free_app(tui *T);
void tui_screen_setup(tui *T);               /* curses modes and colours, after initscr/newterm */
int qs_bench_tui(qs_cli *cli, int argc, char **argv);   /* tui_bench.c */
int tui_handle_key(tui *T, int ch);
const char *tui_view_name(tui_view_id v);    /* tui_view.c */
/* tui_popups.c: `f` and `o` */
void tui_choose_formats(tui *T);
void tui_format_options(tui *T);

/* tui_args.c: split a `:` command line into words (blanks separate; '...' literal; "..." and bare
** words take \x as x); *out is NULL-terminated, malloc'd.  Returns the count, -1 out of memory. */
int tui_split_args(const char *s, char ***out);
void tui_free_args(char **v);

/* tui_keys.c */
typedef enum tui_act {
    TA_NONE = 0, TA_UP, TA_DOWN, TA_LEFT, TA_RIGHT, TA_PGUP, TA_PGDN, TA_HOME, TA_END, TA_ENTER, TA_BACK, TA_TAB,
    TA_SEARCH, TA_NEXT, TA_PREV, TA_SORT, TA_SORT_REV, TA_FILTER, TA_FORMATS, TA_OPTIONS, TA_EXPORT, TA_RECOMPUTE,
    TA_CMDLINE, TA_HELP, TA_CLOSE, TA_QUIT, TA_HIST_KIND, TA_HIST_ALL, TA_LOGY, TA_WORST, TA_SECOND, TA_METRIC, TA_REDRAW,
    TA_VIEW, TA_COUNT
} tui_act;

#define TUI_HINTS 6
typedef struct tui_hint {         /* what the key-hint bar of some views says for a binding */
    unsigned views;               /* bit per tui_view_id */
    int rank;                     /* place in the bar, lower first (a narrow bar loses entries from the end) */
    const char *text;             /* "KEY what" */
} tui_hint;

/* One row of the key table: the keys of an action, in all views (views 0) or in some. */
typedef struct tui_binding {
    tui_act act;
    unsigned views;               /* bit per tui_view_id; 0 = every view */
    int keys[5];                  /* 0-terminated */
    const char *label;            /* how the keys are written in the help */
    const char *help;
    tui_view_id to;               /* TA_VIEW: the view the keys open */
    const char *tab[2];           /* TA_VIEW: its name in the title's strip, and a shorter one */
    tui_hint hint[TUI_HINTS];
} tui_binding;

const tui_binding *tui_key_table(size_t *n);   /* the rows, in dispatch order; *n of them */
int tui_binding_has(const tui_binding *b, int ch);
const tui_binding *tui_key_binding(tui_view_id v, int ch);   /* NULL: not bound in v */
tui_act tui_key_action(tui_view_id v, int ch);
int tui_help_lines(char ***lines);           /* the help text, generated from the key table */
int tui_help_lines_w(int w, char ***lines);  /* the same wrapped at w columns (continuations indented) */
const char *tui_hint_bar(tui_view_id v);     /* the key hints shown at the bottom of a view */
void tui_view_strip(int shorter, char *out, size_t cap);   /* the title's "1 Tensors 2 Formats ..." */
/* The hint bar in at most w columns: entries ("KEY what", two spaces apart) keep their keys and cut
** their descriptions to the longest common length that fits (at least 4 letters); then entries
** go from the end, "? help" last. */
void tui_fit_hints(const char *bar, int w, char *out, size_t cap);

/* tui_data.c */
int tui_load_tensors(tui *T, qs_err *e);
void tui_apply_view(tui *T);                 /* filter + sort into vis */
void tui_count_results(tui *T);              /* tui_tensor.nresults of every tensor */
tui_tensor *tui_cur_tensor(tui *T);
int tui_cur_tensor_index(tui *T);
void tui_load_metrics(tui *T);
void tui_cursor_best_format(tui *T);
/* s in at most w columns, cut in the middle with "~" where it shares a prefix (or else a suffix)
** with one of the peers, so that two cut names never look the same when their difference fits */
void tui_cut_end(const char *s, int w, char *out, size_t cap);   /* cut at the end with "..." (tui_cut.c) */
void tui_cut_middle(const char *s, const char *const *peers, int npeers, int w, char *out, size_t cap);   /* Formats cursor on the best block format of the tensor */               /* of the current tensor, every chosen format */
void tui_hist_cache_clear(tui *T);
int tui_load_hist(tui *T, int fi, const char *which, qs_hist *h);   /* 0 ok */
int tui_load_blocks(tui *T, int ti, int fi);
void tui_blocks_free(tui_blocks *b);
int tui_load_runs(tui *T, qs_err *e);
int tui_load_kres(tui *T, qs_err *e);
/* per-step diagnostic of a run (metric index < tui_rl_nmetrics()); arrays malloc'd */
int tui_rl_nmetrics(void);
const char *tui_rl_metric_name(int m);
/* A run's counts and every diagnostic in one pass over its tokens (any thread, its own db). */
int tui_rl_compute(qs_db *db, int64_t run, tui_rlc *out, qs_err *e);
void tui_rlc_free(tui_rlc *c);
/* The computed diagnostics of a run (NULL until the worker has computed them). */
const tui_rlc *tui_rl_get(tui *T, int64_t run);
void tui_rl_cache_clear(tui *T);
void tui_rl_cache_take(tui *T, tui_rlc *c, int n);   /* adopt the worker's results */
qs_figure *tui_kres_figure(tui *T, int64_t id, qs_err *e);
int tui_fmt_set(tui_fmt *F, const qs_apply *a);
void tui_fmts_free(tui *T);
void tui_sort_formats(tui *T);

/* tui_worker.c */
int tui_job_init(tui_job *j, const char *db_path);
void tui_job_stop(tui_job *j);
int tui_job_analyze(tui_job *j, const char *tensor, const qs_apply *apps, int n, int force);
int tui_job_command(tui_job *j, char **argv);
int tui_job_rl(tui_job *j, const int64_t *runs, int n);
void tui_job_cancel(tui_job *j);

/* tui_plot.c */
void tui_draw_figure(tui *T, qs_figure *f, int y0, int x0, int h, int w);
/* The same, the title left out in a region under 16 rows (for views whose list names the plot:
** the rows go to the data) */
void tui_draw_figure_short(tui *T, qs_figure *f, int y0, int x0, int h, int w);
int tui_export_png(tui *T, char *path, size_t cap);
/* colour pairs */
enum { CP_HEAD = 1, CP_SEL, CP_STATUS, CP_HINT, CP_ERR, CP_BEST, CP_SIGN, CP_EXP, CP_MANT, CP_DIM, CP_OK,
       CP_HEAT0 };    /* CP_HEAT0 .. CP_HEAT0+7: heat ramp */
#define TUI_NHEAT 8

/* tui_ui.c */
void tui_catch_signals(void);
int tui_interrupted(void);                   /* the SIGINT/SIGTERM/SIGHUP that arrived (0 none): leave loops and quit */
void tui_set_msg(tui *T, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int tui_prompt(tui *T, const char *label, char *buf, size_t cap);   /* 1 on Enter, 0 on Esc */
void tui_fmt_num(double v, char *buf, size_t cap);      /* compact number, NaN as "-" */
void tui_addstr_clip(int y, int x, const char *s, int w);

#endif
