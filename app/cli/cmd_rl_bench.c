/*
** `qscope bench rl`: throughput of the RL log path on a generated mmlog log — parse only, the full
** import into a fresh database (CSV and JSONL), and `ais` over the imported run.  Min and median of
** repeated runs, tokens per second.
*/
#include "cmd_rl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bench_util.h"
#include "../../analysis/ais_store.h"
#include "../../store/rl_log.h"

int qs_bench_rl(qs_cli *cli, int quick, int json);

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

static double u01(uint64_t *s) { return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0; }

/* steps x seqs x T tokens, log-probs with ~8 significant digits as frameworks print them */
static int write_logs(const char *csv, const char *jsonl, int steps, int seqs, int T)
{
    FILE *c = fopen(csv, "w"), *j = fopen(jsonl, "w");
    if (!c || !j) { if (c) fclose(c); if (j) fclose(j); return -1; }
    fprintf(c, "step,seq_id,group_id,tok_idx,lp_rollout,lp_train,adv,reward,entropy,mask\n");
    fprintf(j, "{\"schema\":\"mmlog-v1\",\"framework\":\"qscope bench rl\"}\n");
    uint64_t s = 0x9E3779B97F4A7C15ull;
    double *lr = malloc((size_t)T * sizeof *lr), *lt = malloc((size_t)T * sizeof *lt), *en = malloc((size_t)T * sizeof *en);
    if (!lr || !lt || !en) { free(lr); free(lt); free(en); fclose(c); fclose(j); return -1; }
    for (int st = 0; st < steps; st++)
        for (int i = 0; i < seqs; i++) {
            double r = (double)(rng_next(&s) % 2), a = u01(&s) * 2 - 1;
            for (int t = 0; t < T; t++) {
                lr[t] = log(u01(&s)) * 0.7;
                lt[t] = fmin(0, lr[t] + (u01(&s) - 0.5) * 0.1);
                en[t] = u01(&s) * 2;
                fprintf(c, "%d,%d:%d,%d:%d,%d,%.8g,%.8g,%.6g,%g,%.4g,1\n", st, st, i, st, i / 8, t, lr[t], lt[t], a, r, en[t]);
            }
            fprintf(j, "{\"step\":%d,\"seq_id\":\"%d:%d\",\"group_id\":\"%d:%d\",\"reward\":%g,\"adv\":%.6g,\"lp_rollout\":[", st, st, i,
                    st, i / 8, r, a);
            for (int t = 0; t < T; t++) fprintf(j, "%s%.8g", t ? "," : "", lr[t]);
            fprintf(j, "],\"lp_train\":[");
            for (int t = 0; t < T; t++) fprintf(j, "%s%.8g", t ? "," : "", lt[t]);
            fprintf(j, "],\"entropy\":[");
            for (int t = 0; t < T; t++) fprintf(j, "%s%.4g", t ? "," : "", en[t]);
            fprintf(j, "]}\n");
        }
    free(lr); free(lt); free(en);
    int bad = ferror(c) || ferror(j);
    bad |= fclose(c) != 0;
    bad |= fclose(j) != 0;
    return bad ? -1 : 0;
}

static int parse_only(const char *path, uint64_t *tokens, qs_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return qs_fail(e, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); fclose(f); return qs_fail(e, "%s: cannot read", path); }
    fclose(f);
    qs_rl_parse_info info;
    double t0 = qs_now_s();
    int rc = qs_rl_parse(b, (size_t)n, NULL, &info, e);
    (void)t0;
    *tokens = info.tokens;
    qs_rl_parse_info_free(&info);
    free(b);
    return rc;
}

typedef struct stat3 { double best, median; } stat3;
typedef struct bres { const char *name; stat3 s; double mb; } bres;

static stat3 summarize(double *t, int n, double work)
{
    qsort(t, (size_t)n, sizeof *t, qs_bench_cmp);
    return (stat3){work / t[0], work / t[n / 2]};
}

int qs_bench_rl(qs_cli *cli, int quick, int json)
{
    (void)cli;
    int steps = quick ? 4 : 16, seqs = 256, T = quick ? 256 : 1000, reps = quick ? 3 : 5;
    double ntok = (double)steps * seqs * T;
    char dir[4000];
    if (qs_cli_tempdir("bench-rl", dir, sizeof dir)) return qs_cli_error(QS_EXIT_ERR, "cannot create a temporary directory");
    char csv[4100], jsonl[4100], dbp[4100];
    snprintf(csv, sizeof csv, "%s/log.csv", dir);
    snprintf(jsonl, sizeof jsonl, "%s/log.jsonl", dir);
    snprintf(dbp, sizeof dbp, "%s/b.db", dir);
    int rc = QS_EXIT_OK;
    qs_err e = {{0}};
    if (!json) fprintf(stderr, "writing a %.0f-token log (%d steps x %d sequences x %d tokens) ...\n", ntok, steps, seqs, T);
    if (write_logs(csv, jsonl, steps, seqs, T)) { rc = qs_cli_error(QS_EXIT_ERR, "cannot write the logs in %s", dir); goto out; }
    bres res[5];
    int nr = 0;
    double t[9];
    const char *files[2] = {csv, jsonl};
    for (int f = 0; f < 2 && rc == QS_EXIT_OK; f++) {
        struct stat sb;
        stat(files[f], &sb);
        for (int r = 0; r < reps; r++) {
            uint64_t nt;
            double t0 = qs_now_s();
            if (parse_only(files[f], &nt, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
            t[r] = qs_now_s() - t0;
        }
        if (rc) break;
        res[nr++] = (bres){f ? "parse JSONL (read + validate, no database)" : "parse CSV (read + validate, no database)",
                                     summarize(t, reps, ntok), (double)sb.st_size / 1e6};
        for (int r = 0; r < reps; r++) {
            unlink(dbp);
            char side[4200];
            snprintf(side, sizeof side, "%s-wal", dbp); unlink(side);
            snprintf(side, sizeof side, "%s-shm", dbp); unlink(side);
            qs_db *db = qs_db_open(dbp, &e);
            if (!db) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
            qs_rl_import_opts o = {0};
            o.run = "bench";
            qs_rl_import_result ir;
            double t0 = qs_now_s();
            int irc = qs_rl_import(db, files[f], &o, &ir, &e);
            t[r] = qs_now_s() - t0;
            if (!irc && f == 1 && r == reps - 1) {
                /* ais over the imported run (no storing: the computation and the read) */
                double ta[9];
                qs_ais_opts ao;
                qs_ais_opts_default(&ao);
                for (int k = 0; k < reps && !irc; k++) {
                    qs_ais_result ar;
                    double t1 = qs_now_s();
                    irc = qs_ais_run(db, "bench", &ao, &ar, &e);
                    ta[k] = qs_now_s() - t1;
                    if (!irc) qs_ais_result_free(&ar);
                }
                if (!irc) res[4] = (bres){"ais over the stored run (read, diagnostics of every step)", summarize(ta, reps, ntok), 0};
            }
            qs_db_close(db);
            if (irc) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
        }
        if (rc) break;
        res[nr++] = (bres){f ? "import-log JSONL (parse + store, one transaction)" : "import-log CSV (parse + store, one transaction)",
                                     summarize(t, reps, ntok), (double)sb.st_size / 1e6};
    }
    if (rc == QS_EXIT_OK) {
        /* order: parse CSV, import CSV, parse JSONL, import JSONL, ais */
        if (json) {
            json_t *a = json_array();
            for (int i = 0; i < 5; i++)
                json_array_append_new(a, json_pack("{s:s,s:f,s:f,s:s,s:f}", "name", res[i].name, "best", res[i].s.best / 1e6,
                                                   "median", res[i].s.median / 1e6, "unit", "M tokens/s", "file_mb", res[i].mb));
            json_t *top = json_pack("{s:s,s:f,s:i,s:o}", "bench", "rl", "tokens", ntok, "repeats", reps, "results", a);
            char *s = json_dumps(top, JSON_INDENT(2));
            if (s) puts(s);
            free(s);
            json_decref(top);
        } else {
            printf("%-60s %10s %10s\n", "benchmark", "best", "median");
            for (int i = 0; i < 5; i++)
                printf("%-60s %10.2f %10.2f M tokens/s\n", res[i].name, res[i].s.best / 1e6, res[i].s.median / 1e6);
            printf("(%.0f tokens; CSV %.0f MB, JSONL %.0f MB; %d repeats)\n", ntok, res[0].mb, res[2].mb, reps);
        }
    }
out:
    unlink(csv);
    unlink(jsonl);
    unlink(dbp);
    char side[4200];
    snprintf(side, sizeof side, "%s-wal", dbp); unlink(side);
    snprintf(side, sizeof side, "%s-shm", dbp); unlink(side);
    rmdir(dir);
    return rc;
}
