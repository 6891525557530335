/*
** `qscope import-log` and `qscope runs`: RL per-token logs in, and the list of stored runs (RL runs,
** then the training runs of `qscope train`, runs_train.h).
*/
#include "cmd_rl.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../store/io_err.h"
#include "../../store/json_out.h"
#include "../../store/q_rl.h"
#include "../../store/rl_log.h"
#include "../../store/train_store.h"
#include "runs_train.h"

int qs_cmd_import_log(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {{"run", required_argument, 0, 'r'}, {"label", required_argument, 0, 'l'},
                                       {"replace", no_argument, 0, 'R'}, {"json", no_argument, 0, 'J'},
                                       {"quiet", no_argument, 0, 'q'}, {0, 0, 0, 0}};
    qs_rl_import_opts o = {0};
    int json = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "qr:", lo, NULL)) != -1) {
        switch (ch) {
        case 'r': o.run = optarg; break;
        case 'l': o.label = optarg; break;
        case 'R': o.replace = 1; break;
        case 'J': json = 1; break;
        case 'q': o.quiet = 1; break;
        default: return qs_cli_usage("import-log", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return qs_cli_usage("import-log", "give a log FILE (.csv or .jsonl, mmlog v1)");
    if (o.run && argc - optind > 1) return qs_cli_usage("import-log", "--run names one run: give one FILE");
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    int rc = QS_EXIT_OK;
    json_t *out = json_array();
    for (int i = optind; i < argc; i++) {
        qs_err e = {{0}};
        qs_rl_import_result r;
        if (qs_rl_import(db, argv[i], &o, &r, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
        double tps = r.seconds > 0 ? (double)r.info.tokens / r.seconds : 0;
        if (r.info.n_far && !o.quiet)
            fprintf(stderr, "qscope: warning: %s: %llu tokens have |lp_train - lp_rollout| > 20 nats (first on line %llu); "
                    "diagnostics clamp the log-ratio to [-20, 20]\n", qs_esc(argv[i]), (unsigned long long)r.info.n_far,
                    (unsigned long long)r.info.far_line);
        if (json) {
            json_t *jo = json_pack("{s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:f}", "run_id",
                                                 (json_int_t)r.run_id, "encoding",
                                                 r.info.format == QS_RL_CSV ? "csv" : "jsonl", "tokens",
                                                 (json_int_t)r.info.tokens, "sequences", (json_int_t)r.info.seqs, "steps",
                                                 (json_int_t)r.info.steps, "groups", (json_int_t)r.info.groups,
                                                 "far_tokens", (json_int_t)r.info.n_far, "seconds", r.seconds,
                                                 "tokens_per_s", tps);
            qs_json_set_text(jo, "run", r.run);
            qs_json_set_text(jo, "file", argv[i]);
            json_array_append_new(out, jo);
        } else {
            printf("%s%s%s: %llu tokens, %llu sequences, %llu steps from %s (%s) in %.2f s (%.2f M tokens/s)\n",
                   qs_c_bold(cli), qs_esc(r.run), qs_c_off(cli), (unsigned long long)r.info.tokens,
                   (unsigned long long)r.info.seqs, (unsigned long long)r.info.steps, qs_esc(argv[i]),
                   r.info.format == QS_RL_CSV ? "csv" : "jsonl", r.seconds, tps / 1e6);
        }
    }
    if (json && rc == QS_EXIT_OK) {
        char *s = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        if (s) puts(s);
        free(s);
    }
    json_decref(out);
    qs_db_close(db);
    return rc;
}

static void put_num(FILE *f, double v)
{
    if (!isnan(v)) fprintf(f, "%.17g", v);   /* NaN: absent */
}

/* mmlog v1 CSV of a stored run, exact (%.17g) so that importing it again gives the same tokens */
static int export_run(qs_db *db, const char *run, const char *out)
{
    qs_err e = {{0}};
    qs_rl_cursor *st = qs_rl_tokens_open(db, run, &e);
    if (!st) return qs_cli_err(QS_EXIT_ERR, &e);
    FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) { qs_rl_cursor_close(st); return qs_cli_error(QS_EXIT_ERR, "%s: cannot create", out); }
    fprintf(f, "step,seq_id,group_id,tok_idx,lp_rollout,lp_train,adv,reward,entropy,mask,token_id\n");
    long long n = 0;
    int rc;
    qs_rl_token tk;
    while ((rc = qs_rl_tokens_next(st, &tk, &e)) == 1) {
        const qs_rl_row *t = &tk.row;
        const char *sid = tk.seq_id, *gid = tk.group_id;
        fprintf(f, "%lld,", (long long)t->step);
        /* ids a CSV field cannot hold become the ordinal; control characters are escaped */
        if (sid && !strpbrk(sid, ",\"\r\n")) fputs(qs_esc(sid), f); else fprintf(f, "%lld", (long long)t->seq);
        fputc(',', f);
        if (gid && !strpbrk(gid, ",\"\r\n")) fputs(qs_esc(gid), f);
        else if (t->grp >= 0) fprintf(f, "%lld", (long long)t->grp);
        fprintf(f, ",%lld,%.17g,%.17g,", (long long)t->pos, t->lp_rollout, t->lp_train);
        put_num(f, t->adv);
        fputc(',', f);
        put_num(f, t->reward);
        fputc(',', f);
        put_num(f, t->entropy);
        fprintf(f, ",%d,", t->mask != 0);
        if (t->token_id >= 0) fprintf(f, "%lld", (long long)t->token_id);
        fputc('\n', f);
        n++;
    }
    qs_rl_cursor_close(st);
    int werr = ferror(f) ? (errno ? errno : EIO) : 0;
    if (f != stdout) { if (fclose(f) != 0 && !werr) werr = errno ? errno : EIO; } else fflush(f);
    if (rc < 0) return qs_cli_err(QS_EXIT_ERR, &e);
    if (werr) { qs_write_fail(&e, out, werr); return qs_cli_err(QS_EXIT_ERR, &e); }
    if (!n) return qs_cli_error(QS_EXIT_ERR, "no run named '%s' with tokens (see `qscope runs`)", run);
    return QS_EXIT_OK;
}

int qs_cmd_runs(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'J'}, {"rm", no_argument, 0, 'D'},
                                       {"export", required_argument, 0, 'X'}, {"output", required_argument, 0, 'o'},
                                       {0, 0, 0, 0}};
    int json = 0, rm = 0, ch;
    const char *exp = NULL, *outfile = "-";
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
        switch (ch) {
        case 'J': json = 1; break;
        case 'D': rm = 1; break;
        case 'X': exp = optarg; break;
        case 'o': outfile = optarg; break;
        default: return qs_cli_usage("runs", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (exp && (rm || json || optind < argc)) return qs_cli_usage("runs", "--export RUN takes no other arguments but -o FILE");
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    if (exp) {   /* an RL run of that name, else a training run's steps */
        qs_err xe = {{0}};
        int rl = 0, rc;
        if (qs_run_exists(db, exp, &rl, &xe)) rc = qs_cli_err(QS_EXIT_ERR, &xe);
        else if (rl || qs_runs_train_exists(db, exp) == 0) rc = export_run(db, exp, outfile);
        else rc = qs_runs_train_export(db, exp, outfile);
        qs_db_close(db);
        return rc;
    }
    qs_err e = {{0}};
    int rc = QS_EXIT_OK;
    if (rm) {
        if (optind >= argc) { qs_db_close(db); return qs_cli_usage("runs", "--rm needs run names"); }
        /* the names' training runs, known before the transaction (a read inside it would hold a snapshot) */
        const char **tn = calloc((size_t)(argc - optind), sizeof *tn);
        size_t ntn = 0;
        int *is_train = calloc((size_t)(argc - optind), sizeof *is_train);
        if (!tn || !is_train) {
            free(tn); free(is_train); qs_db_close(db);
            return qs_cli_error(QS_EXIT_ERR, "out of memory");
        }
        for (int i = optind; i < argc && rc == QS_EXIT_OK; i++) {
            int t = qs_runs_train_exists(db, argv[i]);
            if (t < 0) rc = QS_EXIT_ERR;
            else if ((is_train[i - optind] = t)) tn[ntn++] = argv[i];
        }
        if (rc != QS_EXIT_OK || qs_db_begin(db, &e)) {
            free(tn); free(is_train); qs_db_close(db);
            return rc != QS_EXIT_OK ? rc : qs_cli_err(QS_EXIT_ERR, &e);
        }
        for (int i = optind; i < argc; i++) {   /* a name removes its RL run and its training run */
            int found;
            if (qs_rl_run_delete(db, argv[i], &found, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
            if (!found && !is_train[i - optind]) {
                rc = qs_cli_error(QS_EXIT_ERR, "no run named '%s' (see `qscope runs`)", qs_esc(argv[i]));
                break;
            }
        }
        if (rc == QS_EXIT_OK && ntn && qs_train_run_remove(db, tn, ntn, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        free(tn);
        free(is_train);
        if (rc == QS_EXIT_OK && qs_db_commit(db, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        if (rc != QS_EXIT_OK) qs_db_rollback(db);
        qs_db_close(db);
        return rc;
    }
    const char *pat = optind < argc ? argv[optind] : "*";
    /* counts from rl_token itself, so runs written by any command are listed the same way */
    qs_run_item *runs;
    size_t nruns;
    if (qs_run_list(db, pat, &runs, &nruns, &e)) { qs_db_close(db); return qs_cli_err(QS_EXIT_ERR, &e); }
    json_t *out = json_array();
    if (!json) printf("%s%-40s %12s %7s %-13s %s%s\n", qs_c_head(cli), "RUN", "TOKENS", "STEPS", "STEP RANGE", "LABEL / SOURCE", qs_c_off(cli));
    for (size_t i = 0; i < nruns; i++) {
        const char *name = runs[i].name, *label = runs[i].label, *src = runs[i].source, *created = runs[i].created_at;
        long long ntok = runs[i].tokens, nst = runs[i].steps;
        long long s0 = runs[i].first_step, s1 = runs[i].last_step;
        if (json) {
            json_t *m = json_loads(runs[i].metadata, 0, NULL);
            json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:o}", "created_at", created, "tokens", (json_int_t)ntok, "steps",
                                  (json_int_t)nst, "first_step", (json_int_t)s0, "last_step", (json_int_t)s1,
                                  "metadata", m ? m : json_object());
            qs_json_set_text(o, "run", name);
            qs_json_set_text(o, "label", label);
            qs_json_set_text(o, "source", src);
            json_array_append_new(out, o);
        } else {
            char range[32];
            snprintf(range, sizeof range, nst ? "%lld..%lld" : "-", s0, s1);
            printf("%-40s %12lld %7lld %-13s %s\n", qs_esc(name), ntok, nst, range, qs_esc(*label ? label : src));
        }
    }
    qs_run_items_free(runs, nruns);
    json_t *train = json_array();
    rc = qs_runs_train_list(cli, db, pat, json ? train : NULL);
    if (json && rc == QS_EXIT_OK) {   /* the RL runs and the training runs under their own keys */
        json_t *all = json_pack("{s:o,s:o}", "rl_runs", out, "train_runs", train);
        char *s = json_dumps(all, JSON_INDENT(2));
        if (s) puts(s);
        free(s);
        json_decref(all);
    } else {
        json_decref(out);
        json_decref(train);
    }
    qs_db_close(db);
    return rc;
}
