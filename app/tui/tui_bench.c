/*
** `qscope bench tui`: how fast the workbench answers, measured headless.
**
** A temporary database gets N tensors (default 10,000): 100 generated 64 x 64 Gaussian tensors
** imported the normal way (hashes, statistics), then replicated under new names by SQL until
** there are N, so the tensor list has its full length.  The first tensor is analyzed under the
** workbench's default formats (metrics, histograms, per-block arrays), so Formats, Histogram,
** Blocks and the Inspector redraw from stored results.
**
** The terminal is ncurses on /dev/null (newterm, xterm-256color, 120 x 40): the timings include
** building every line and ncurses' screen update, not the terminal emulator's own painting.
**   first frame: open the database, load the tensor list and the format list, draw (min and
**                median of repeated cold starts in one process)
**   redraw:      one key (a cursor move or a toggle) and the redraw, per view
** Targets: first frame < 150 ms, redraw < 30 ms for stored results.  Opening the RL view
** computes every run's diagnostics from its tokens (once); it is reported without a target.
*/
#include <curses.h>
#include <locale.h>
#include <wchar.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../cli/analyze_run.h"
#include "../cli/bench_util.h"
#include "../../analysis/importer.h"
#include "tui.h"
#include "../../datasets/gen.h"
#include "../../store/q_bench.h"
#include "../../store/tensor.h"

static int fill_gauss(void *ctx, uint64_t start, size_t n, float *out)
{
    qs_gen_fill(ctx, start, n, out);
    return 0;
}

static int build_db(const char *path, int ntensors, qs_err *e)
{
    qs_db *db = qs_db_open(path, e);
    if (!db) return -1;
    int rc = -1, base = ntensors < 100 ? ntensors : 100;
    json_t *rep = json_array();
    if (qs_db_begin(db, e)) goto out;
    for (int i = 0; i < base; i++) {
        qs_gen_spec g;
        memset(&g, 0, sizeof g);
        qs_gen_defaults(&g);
        g.kind = QS_GEN_GAUSSIAN;
        g.rows = 64;
        g.cols = 64;
        g.seed = (uint64_t)i + 1;
        char name[64], src[80];
        snprintf(name, sizeof name, "bench:layer%05d.weight", i);
        snprintf(src, sizeof src, "gen:%s", name);
        uint64_t shape[2] = {64, 64};
        if (qs_import_f32(db, name, shape, 2, fill_gauss, &g, src, "generated", NULL, rep, e)) goto out;
    }
    /* replicate to ntensors: same data and statistics, new names */
    if (qs_bench_replicate_tensors(db, ntensors, base, e)) goto out;
    /* two RL runs of 50 steps x 64 sequences x 64 tokens (409,600 tokens) */
    if (qs_bench_rl_runs(db, e)) goto out;
    if (qs_db_commit(db, e)) goto out;
    rc = 0;
out:
    if (rc) qs_db_rollback(db);
    json_decref(rep);
    qs_db_close(db);
    return rc;
}

typedef struct bres { const char *what; double min, med, max; int n; double target; } bres;

static void stats(double *t, int n, bres *r)
{
    qsort(t, (size_t)n, sizeof *t, qs_bench_cmp);
    r->min = t[0] * 1e3;
    r->med = t[n / 2] * 1e3;
    r->max = t[n - 1] * 1e3;
    r->n = n;
}

/* With QSCOPE_BENCH_DUMP set, the screen after each measurement goes to stderr (to check what was
** timed). */
static void dump(void)
{
    if (!getenv("QSCOPE_BENCH_DUMP")) return;
    for (int y = 0; y < LINES; y++) {
        wchar_t line[512];
        int n = mvinnwstr(y, 0, line, 511 < COLS ? 511 : COLS);
        if (n < 0) n = 0;
        line[n] = 0;
        fprintf(stderr, "%ls\n", line);
    }
}

/* n key presses, each followed by a redraw; keys cycle through `keys`. */
static void time_keys(tui *T, const int *keys, int nk, int n, double *t, bres *r)
{
    for (int i = 0; i < n; i++) {
        double t0 = qs_now_s();
        tui_handle_key(T, keys[i % nk]);
        tui_draw(T);
        t[i] = qs_now_s() - t0;
    }
    stats(t, n, r);
    dump();
}

/* Analyze the first tensor of the database at path under the default formats, with per-block
** data, so that the Formats, Histogram and Blocks views have results to show. */
static int analyze_first(qs_cli *cli, const char *path, qs_err *e)
{
    static tui T;
    memset(&T, 0, sizeof T);
    int rc = tui_init_app(&T, cli, path, NULL, e);
    qs_tensor_rec rec;
    memset(&rec, 0, sizeof rec);
    if (!rc) rc = qs_tensor_get(T.db, T.t[T.vis[0]].name, &rec, e);
    for (int i = 0; !rc && i < T.nfmts; i++) {
        int cached = 0;
        rc = qs_analyze_one_cb(T.db, &rec, &T.fmts[i].a, 1, 0, 2, NULL, NULL, NULL, NULL, &cached, e);
    }
    qs_tensor_rec_free(&rec);
    tui_free_app(&T);
    return rc;
}

/* The first frame, cold in this process: open, load, draw; reps times. */
static int time_first_frame(qs_cli *cli, const char *path, int reps, double *t, bres *r, qs_err *e)
{
    static tui T;
    for (int i = 0; i < reps; i++) {
        memset(&T, 0, sizeof T);
        double t0 = qs_now_s();
        int ok = tui_init_app(&T, cli, path, NULL, e) == 0;
        if (ok) {
            pthread_mutex_init(&T.job.mu, NULL);
            T.bench = 1;
            T.color = 1;
            tui_screen_setup(&T);
            tui_draw(&T);
        }
        t[i] = qs_now_s() - t0;
        if (ok) pthread_mutex_destroy(&T.job.mu);
        tui_free_app(&T);
        if (!ok) return -1;
    }
    *r = (bres){"first frame (open + load + draw)", 0, 0, 0, 0, 150};
    stats(t, reps, r);
    return 0;
}

/* The redraw after keys in every view, in the order a user goes through them; the results into
** R (returns how many). */
static int time_views(tui *T, int keys_n, double *t, bres *R)
{
    int nr = 0;
    static const int jk[] = {'j', 'j', 'j', 'k', 'k', 'k'};
    static const int pg[] = {KEY_NPAGE, KEY_NPAGE, KEY_PPAGE, KEY_PPAGE};
    static const int srt[] = {'s'};
    static const int blk[] = {KEY_RIGHT, KEY_RIGHT, KEY_DOWN, KEY_LEFT, KEY_LEFT, KEY_UP};
    static const int vv[] = {'v'};
    R[nr] = (bres){"Tensors: j/k", 0, 0, 0, 0, 30};
    time_keys(T, jk, 6, keys_n, t, &R[nr++]);
    R[nr] = (bres){"Tensors: PgDn/PgUp", 0, 0, 0, 0, 30};
    time_keys(T, pg, 4, keys_n, t, &R[nr++]);
    R[nr] = (bres){"Tensors: s (re-sort all)", 0, 0, 0, 0, 30};
    time_keys(T, srt, 1, keys_n / 5 > 5 ? keys_n / 5 : 5, t, &R[nr++]);
    /* back to the analyzed tensor, sorted by name */
    T->sort_key = 0;
    T->sort_desc = 0;
    tui_apply_view(T);
    T->lt.cur = 0;
    tui_handle_key(T, '2');
    tui_draw(T);
    R[nr] = (bres){"Formats (stored results + Pareto plot): j/k", 0, 0, 0, 0, 30};
    time_keys(T, jk, 6, keys_n, t, &R[nr++]);
    tui_handle_key(T, '3');
    tui_draw(T);
    R[nr] = (bres){"Histogram (12 formats overlaid): v", 0, 0, 0, 0, 30};
    time_keys(T, vv, 1, keys_n / 5 > 5 ? keys_n / 5 : 5, t, &R[nr++]);
    T->lf.cur = 6;   /* mxfp4 in the default list */
    tui_handle_key(T, '4');
    tui_draw(T);
    R[nr] = (bres){"Blocks (heatmap): arrows", 0, 0, 0, 0, 30};
    time_keys(T, blk, 6, keys_n, t, &R[nr++]);
    tui_handle_key(T, '\n');
    tui_draw(T);
    R[nr] = (bres){"Inspector (two formats): j/k", 0, 0, 0, 0, 30};
    time_keys(T, jk, 6, keys_n, t, &R[nr++]);
    static const int lr[] = {KEY_RIGHT, KEY_LEFT};
    R[nr] = (bres){"Inspector: next block (re-encode)", 0, 0, 0, 0, 30};
    time_keys(T, lr, 2, keys_n / 5 > 5 ? keys_n / 5 : 5, t, &R[nr++]);
    /* RL runs: the first visit computes each run's per-step diagnostic from its tokens; later
    ** redraws use the kept series */
    static const int five[] = {'5'}, em[] = {'m'};
    R[nr] = (bres){"RL runs: open (reads 409,600 tokens once)", 0, 0, 0, 0, 0};
    time_keys(T, five, 1, 1, t, &R[nr++]);
    R[nr] = (bres){"RL runs: j/k (series kept)", 0, 0, 0, 0, 30};
    time_keys(T, jk, 6, keys_n, t, &R[nr++]);
    R[nr] = (bres){"RL runs: m (next diagnostic, kept)", 0, 0, 0, 0, 30};
    time_keys(T, em, 1, keys_n / 5 > 5 ? keys_n / 5 : 5, t, &R[nr++]);
    return nr;
}

static void print_results(int json, unsigned long long ntensors, double build_s, const bres *R, int nr)
{
    if (json) {
        json_t *o = json_pack("{s:I,s:f,s:[]}", "tensors", (json_int_t)ntensors, "build_s", build_s, "results");
        json_t *arr = json_object_get(o, "results");
        for (int i = 0; i < nr; i++)
            json_array_append_new(arr, json_pack("{s:s,s:f,s:f,s:f,s:i,s:f}", "what", R[i].what, "min_ms", R[i].min,
                                                 "median_ms", R[i].med, "max_ms", R[i].max, "n", R[i].n,
                                                 "target_ms", R[i].target));
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("qscope bench tui: %llu tensors (database built in %.1f s), headless 120 x 40 terminal\n", ntensors, build_s);
        printf("%-46s %9s %9s %9s %6s %8s\n", "", "min ms", "median ms", "max ms", "n", "target");
        for (int i = 0; i < nr; i++) {
            if (R[i].target > 0)
                printf("%-46s %9.2f %9.2f %9.2f %6d %5.0f ms %s\n", R[i].what, R[i].min, R[i].med, R[i].max, R[i].n,
                       R[i].target, R[i].med < R[i].target ? "ok" : "SLOW");
            else printf("%-46s %9.2f %9.2f %9.2f %6d %8s\n", R[i].what, R[i].min, R[i].med, R[i].max, R[i].n, "-");
        }
    }
}

int qs_bench_tui(qs_cli *cli, int argc, char **argv)
{
    int quick = 0, json = 0;
    unsigned long long ntensors = 10000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--tensors") && i + 1 < argc) {
            if (qs_parse_u64(argv[++i], &ntensors) || ntensors < 1 || ntensors > 1000000)
                return qs_cli_usage("bench", "bad --tensors '%s' (1..1000000)", argv[i]);
        } else return qs_cli_usage("bench", "unexpected argument '%s'", argv[i]);
    }
    char dir[4000];
    if (qs_cli_tempdir("bench-tui", dir, sizeof dir)) return qs_cli_error(QS_EXIT_ERR, "cannot create a temporary directory");
    char path[4096];
    snprintf(path, sizeof path, "%s/bench.db", dir);
    qs_err e = {{0}};
    int rc = QS_EXIT_ERR;
    double tb = qs_now_s();
    if (!json) fprintf(stderr, "qscope: building a %llu-tensor database...\n", ntensors);
    if (build_db(path, (int)ntensors, &e)) { qs_cli_err(QS_EXIT_ERR, &e); goto cleanup; }
    double build_s = qs_now_s() - tb;
    if (analyze_first(cli, path, &e)) { qs_cli_err(QS_EXIT_ERR, &e); goto cleanup; }

    setlocale(LC_ALL, "");
    setenv("COLUMNS", "120", 1);
    setenv("LINES", "40", 1);
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    SCREEN *sc = out && in ? newterm("xterm-256color", out, in) : NULL;
    if (!sc && out && in) sc = newterm("vt100", out, in);
    if (!sc) {
        if (out) fclose(out);
        if (in) fclose(in);
        qs_cli_error(QS_EXIT_ERR, "cannot start a headless terminal (terminfo for xterm-256color or vt100 missing)");
        goto cleanup;
    }
    set_term(sc);
    bres R[16];
    int nr = 0;
    const int reps = quick ? 5 : 15, keys_n = quick ? 60 : 300;
    double *t = malloc((size_t)(keys_n > reps ? keys_n : reps) * sizeof *t);
    if (!t) goto term;
    if (time_first_frame(cli, path, reps, t, &R[nr++], &e)) { qs_cli_err(QS_EXIT_ERR, &e); goto term; }
    static tui T;
    memset(&T, 0, sizeof T);
    if (tui_init_app(&T, cli, path, NULL, &e)) { qs_cli_err(QS_EXIT_ERR, &e); tui_free_app(&T); goto term; }
    pthread_mutex_init(&T.job.mu, NULL);
    T.bench = 1;
    T.color = 1;
    T.auto_analyze = 0;
    T.bench_rl_sync = 1;
    tui_screen_setup(&T);
    tui_draw(&T);
    nr += time_views(&T, keys_n, t, &R[nr]);
    pthread_mutex_destroy(&T.job.mu);
    tui_free_app(&T);
    rc = QS_EXIT_OK;
term:
    free(t);
    endwin();
    delscreen(sc);
    fclose(out);
    fclose(in);
    if (rc == QS_EXIT_OK) print_results(json, ntensors, build_s, R, nr);
cleanup:
    unlink(path);
    {
        char p2[4200];
        snprintf(p2, sizeof p2, "%s-wal", path);
        unlink(p2);
        snprintf(p2, sizeof p2, "%s-shm", path);
        unlink(p2);
    }
    rmdir(dir);
    return rc;
}
