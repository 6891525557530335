/*
** `qscope bench tokenize`: the sequential tokenizer and LoPT (store/llm_lopt.h) at each thread count
** of --threads LIST on one text, and with --peer tokenizers Hugging Face `tokenizers` on the same text
** and tokenizer, side by side in one run (issue 29, "Must reach").
**
** The runs are interleaved (each repetition times the sequential tokenizer, then LoPT at every thread
** count), so a shared machine's load changes slow them alike; best and median of --reps.  Every LoPT
** output is compared with the sequential ids in the same run: a difference is an error (exit 1), never
** a number.  The sequential time is qs_llm_tokenize_named into a buffer allocated beforehand; LoPT's
** includes its own allocation and merge (its API).  The peer (tests/bench/tokenizers_peer.py, or
** QS_TOKENIZERS_PEER) rebuilds the tokenizer from the same GGUF or tokenizer.json, times `encode` with
** RAYON_NUM_THREADS=1 and `encode_batch` over paragraphs with its default threads, and reports a hash
** of its ids so that "same text, same tokenizer" is checked, not assumed.
*/
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "bench_util.h"
#include "cli.h"
#include "../../analysis/lopt_check.h"
#include "../../kernels/pool.h"
#include "../../store/llm_load.h"
#include "../../store/llm_lopt.h"

#define CMD "bench tokenize"
#define MAX_TH 32
#define MAX_REPS 100
#define PEER_SCRIPT "tests/bench/tokenizers_peer.py"

typedef struct bopts {
    const char *text, *model, *tokenizer, *peer;
    int th[MAX_TH], nth, reps, json;
    size_t chunk, overlap;
} bopts;

/* "1,2,4" or "1-8" or a mix; each 1..256. */
static int parse_threads(const char *s, bopts *o)
{
    const char *p = s;
    o->nth = 0;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p) goto bad;
        if (*end == '-') { p = end + 1; b = strtol(p, &end, 10); if (end == p) goto bad; }
        if (a < 1 || b < a || b > 256) goto bad;
        for (long t = a; t <= b; t++) {
            if (o->nth == MAX_TH) return qs_cli_usage(CMD, "--threads: at most %d thread counts", MAX_TH);
            o->th[o->nth++] = (int)t;
        }
        if (*end == ',' && end[1]) p = end + 1;
        else if (*end) goto bad;
        else p = end;
    }
    if (o->nth) return 0;
bad:
    return qs_cli_usage(CMD, "--threads: '%s' is not a list of thread counts 1..256 (e.g. 1,2,4 or 1-8)", s);
}

static int parse_bytes(const char *opt, const char *v, size_t lo, size_t *out)
{
    unsigned long long x;
    if (qs_parse_u64(v, &x) || x < lo || x > (1ull << 30))
        return qs_cli_usage(CMD, "%s: '%s' is not a byte count %zu..%llu", opt, v, lo, 1ull << 30);
    *out = (size_t)x;
    return 0;
}

static int parse(int argc, char **argv, bopts *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 5;
    int quick = 0, reps_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (!strcmp(a, "--quick")) { quick = 1; continue; }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v || strncmp(a, "--", 2)) return qs_cli_usage(CMD, "unexpected argument '%s'", a);
        i++;
        int rc = 0;
        if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(a, "--peer")) {
            if (strcmp(v, "tokenizers")) return qs_cli_usage(CMD, "--peer: '%s' is not a known peer (tokenizers)", v);
            o->peer = v;
        } else if (!strcmp(a, "--threads")) rc = parse_threads(v, o);
        else if (!strcmp(a, "--reps")) { rc = qs_cli_parse_int(CMD, "--reps", v, 1, MAX_REPS, &o->reps); reps_set = 1; }
        else if (!strcmp(a, "--lopt-chunk")) rc = parse_bytes("--lopt-chunk", v, 1, &o->chunk);
        else if (!strcmp(a, "--lopt-overlap")) rc = parse_bytes("--lopt-overlap", v, 1, &o->overlap);
        else return qs_cli_usage(CMD, "unknown option '%s'", a);
        if (rc) return rc;
    }
    if (o->model && o->tokenizer) return qs_cli_usage(CMD, "--model and --tokenizer exclude each other");
    if (quick && !reps_set) o->reps = 2;
    if (!o->nth) {   /* 1..cores, at least 1 and 2 */
        int c = qs_pool_cpus();
        c = c < 2 ? 2 : c > 16 ? 16 : c;
        for (int t = 1; t <= c; t++) o->th[o->nth++] = t;
    }
    return 0;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, qs_bench_cmp);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static double loadavg(void)
{
    double la = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf", &la) != 1) la = -1; fclose(f); }
    return la;
}

static void machine(json_t *o)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096], model[256] = "unknown";
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    double la = loadavg();
    json_object_set_new(o, "cpu", json_string(model));
    json_object_set_new(o, "cores", json_integer(qs_pool_cpus()));
    json_object_set_new(o, "loadavg_1min", la >= 0 ? json_real(la) : json_null());
}

/* 'path' for a POSIX shell. */
static void shq(char *buf, size_t cap, const char *s)
{
    size_t n = strlen(buf);
    if (n + 1 < cap) buf[n++] = '\'';
    for (; *s && n + 5 < cap; s++) {
        if (*s == '\'') { memcpy(buf + n, "'\\''", 4); n += 4; }
        else buf[n++] = *s;
    }
    if (n + 2 < cap) buf[n++] = '\'';
    buf[n++] = ' ';
    buf[n] = 0;
}

/* The peer's JSON object, or NULL with *why saying why in one line. */
static json_t *run_peer(const bopts *o, int reps, char *why, size_t wcap)
{
    const char *script = getenv("QS_TOKENIZERS_PEER");
    if (!script || !*script) script = PEER_SCRIPT;
    if (access(script, R_OK)) {
        snprintf(why, wcap, "%s not found (run from the project root, or set QS_TOKENIZERS_PEER)", script);
        return NULL;
    }
    char cmd[16384] = "python3 ";
    shq(cmd, sizeof cmd, script);
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "--reps %d %s ", reps, o->tokenizer ? "--tokenizer" : "--model");
    shq(cmd, sizeof cmd, o->tokenizer ? o->tokenizer : o->model ? o->model : QS_LLM_DEFAULT_MODEL);
    if (o->text) shq(cmd, sizeof cmd, o->text);
    else for (int i = 0; i < QS_LOPT_AUSTEN_N; i++) shq(cmd, sizeof cmd, qs_lopt_austen[i]);
    strncat(cmd, "2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    if (!p) { snprintf(why, wcap, "cannot run python3"); return NULL; }
    char line[8192], last[8192] = "";
    json_t *j = NULL;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '{') { json_decref(j); j = json_loads(line, 0, NULL); }
        else if (line[0]) snprintf(last, sizeof last, "%s", line);
    }
    int st = pclose(p);
    const char *miss = j ? json_string_value(json_object_get(j, "missing")) : NULL;
    if (miss) { snprintf(why, wcap, "%s", miss); json_decref(j); return NULL; }
    if (st != 0 || !j) {
        snprintf(why, wcap, "%s failed (exit %d): %s", script, WIFEXITED(st) ? WEXITSTATUS(st) : -1, last[0] ? last : "no output");
        json_decref(j);
        return NULL;
    }
    return j;
}

/* CPU seconds of the whole process (every thread): the work done, whatever the machine's load. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One run's row; t and c (wall and CPU seconds of each repetition) are sorted. */
static json_t *timing(const char *name, int threads, double *t, double *c, int reps, size_t bytes, size_t ntok,
                      double seq_best, double seq_med, double seq_cpu)
{
    double med = median(t, reps), best = t[0], cmed = median(c, reps);
    return json_pack("{s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "run", name, "threads", threads, "best_s", best,
                     "median_s", med, "mb_per_s_best", bytes / best / 1e6, "mb_per_s_median", bytes / med / 1e6,
                     "tokens_per_s_best", ntok / best, "tokens_per_s_median", ntok / med, "speedup_best",
                     seq_best / best, "speedup_median", seq_med / med, "cpu_median_s", cmed, "cpu_over_sequential",
                     seq_cpu > 0 ? cmed / seq_cpu : 1.0);
}

/* Amdahl's law fitted to the measured LoPT run at p threads (the most threads that had a core each):
** LoPT's work is k times the sequential tokenizer's (k: CPU seconds of all threads over the sequential
** run's, medians, measured at p: spans, overlaps, each chunk's cold piece cache, merge, the pool's
** watching), a fraction s of it serial (split, merge, waiting for the last chunk), so
** T(p) = k T_seq (s + (1 - s) / p) and the speed-up S(p) = 1 / (k (s + (1 - s) / p)).  s is solved
** from the wall time at p; outside [0, 1] "fitted" is false and there is no curve (a busy machine: the
** threads did not have their cores).  The curve for 1..16 threads assumes one core per thread, at
** most one thread per chunk, the same k, and no memory-bandwidth limit; 1 thread is the sequential
** tokenizer (LoPT does not cut). */
static json_t *model(const bopts *o, const double *best, const double *kcpu, size_t len, double load0)
{
    int cores = qs_pool_cpus(), at = -1;
    for (int i = 0; i < o->nth; i++)
        if (o->th[i] >= 2 && o->th[i] <= cores && (at < 0 || o->th[i] > o->th[at])) at = i;
    if (at < 0) return json_null();
    const double p = o->th[at], k = kcpu[at], ratio = best[2 + at] / best[0];
    const double raw = (ratio / k - 1 / p) / (1 - 1 / p), sf = raw < 0 ? 0 : raw > 1 ? 1 : raw;
    const double nchunks = o->chunk ? (double)((len + o->chunk - 1) / o->chunk) : 1e30;   /* default: one per thread */
    json_t *curve = json_object();
    for (int q = 1; q <= 16; q++) {
        double pe = q < nchunks ? q : nchunks, v = q == 1 ? 1 : 1 / (k * (sf + (1 - sf) / pe));
        char key[8];
        snprintf(key, sizeof key, "%d", q);
        json_object_set_new(curve, key, json_real(v));
    }
    /* a little below 0 is timing noise (s = 0); a load above cores - 1 before the runs leaves the threads
    ** without their cores, and s would measure that */
    const int busy = load0 > cores - 1, fitted = raw >= -0.05 && raw <= 1 && !busy;
    if (!fitted) { json_decref(curve); curve = json_null(); }   /* a curve from a clamped s would be fiction */
    return json_pack("{s:i,s:f,s:f,s:b,s:b,s:f,s:o}", "from_threads", (int)p, "measured_speedup", 1 / ratio, "serial_fraction",
                     sf, "fitted", fitted, "busy", busy, "work_over_sequential", k, "speedup", curve);
}

/* Time the sequential tokenizer (without and with spans) and LoPT at each thread count, interleaved;
** checks every output. */
static int measure(const bopts *o, const qs_llm_vocab *v, const char *name, const char *text, size_t len,
                   const int32_t *ref, size_t nref, json_t *runs, json_t *out)
{
    int bad = 0, cap = (int)(nref + 64);
    const size_t R = (size_t)o->reps;
    const double load0 = loadavg();   /* the other processes' load, before our runs */
    double *t = calloc((size_t)(o->nth + 2) * R, sizeof *t), *c = calloc((size_t)(o->nth + 2) * R, sizeof *c);
    double best[MAX_TH + 2], kcpu[MAX_TH];
    int32_t *buf = malloc((size_t)cap * sizeof *buf);
    uint32_t *offs = malloc(2 * (size_t)cap * sizeof *offs);
    qs_lopt_stats *sts = calloc((size_t)o->nth, sizeof *sts);
    if (!t || !c || !buf || !offs || !sts) { bad = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto out; }
    for (size_t r = 0; r < R && !bad; r++) {
        qs_err e = {{0}};
        for (int w = 0; w < 2 && !bad; w++) {   /* sequential, then sequential with each token's span */
            double t0 = qs_now_s(), c0 = cpu_s();
            int k = qs_llm_tokenize_offs(v, name, text, len, buf, w ? offs : NULL, cap, &e);
            t[w * R + r] = qs_now_s() - t0;
            c[w * R + r] = cpu_s() - c0;
            if (k < 0) bad = qs_cli_err(QS_EXIT_ERR, &e);
        }
        for (int i = 0; i < o->nth && !bad; i++) {
            qs_lopt_opts lo = {o->th[i], o->chunk, o->overlap};
            int32_t *ids = NULL;
            size_t n = 0;
            double t0 = qs_now_s(), c0 = cpu_s();
            int rc = qs_lopt_tokenize(v, name, text, len, &lo, &ids, NULL, &n, &sts[i], &e);
            t[(size_t)(i + 2) * R + r] = qs_now_s() - t0;
            c[(size_t)(i + 2) * R + r] = cpu_s() - c0;
            if (rc) { bad = qs_cli_err(QS_EXIT_ERR, &e); break; }
            long d = qs_lopt_first_diff(ref, nref, ids, n);
            if (d >= 0)
                bad = qs_cli_error(QS_EXIT_ERR, "%s: LoPT with %d threads (chunk %zu, overlap %zu) differs from the "
                                   "sequential ids at token %ld (%ld vs %ld; %zu vs %zu tokens)", name, o->th[i], o->chunk,
                                   o->overlap, d, (size_t)d < nref ? (long)ref[d] : -1L, (size_t)d < n ? (long)ids[d] : -1L,
                                   nref, n);
            free(ids);
        }
    }
    if (bad) goto out;
    double sm = median(t, o->reps), sb = t[0], sc = median(c, o->reps);   /* median() sorts: t[0] is the best */
    best[0] = sb;
    json_array_append_new(runs, timing("sequential", 1, t, c, o->reps, len, nref, sb, sm, sc));
    json_array_append_new(runs, timing("sequential+spans", 1, t + R, c + R, o->reps, len, nref, sb, sm, sc));
    best[1] = t[R];
    for (int i = 0; i < o->nth; i++) {
        json_t *j = timing("lopt", o->th[i], t + (size_t)(i + 2) * R, c + (size_t)(i + 2) * R, o->reps, len, nref, sb, sm, sc);
        best[2 + i] = t[(size_t)(i + 2) * R];
        kcpu[i] = sc > 0 ? median(c + (size_t)(i + 2) * R, o->reps) / sc : 1;
        json_object_set_new(j, "identical", json_true());
        json_object_set_new(j, "stats", json_pack("{s:I,s:I,s:I,s:I,s:s?}", "chunks", (json_int_t)sts[i].chunks, "anchors",
                                                  (json_int_t)sts[i].anchors, "regrown", (json_int_t)sts[i].regrown,
                                                  "fallback", (json_int_t)sts[i].fallback, "why", sts[i].why));
        json_array_append_new(runs, j);
    }
    json_object_set_new(out, "model", model(o, best, kcpu, len, load0));
    json_object_set_new(out, "loadavg_before", json_real(load0));
out:
    free(t); free(c); free(buf); free(offs); free(sts);
    return bad;
}

/* The peer's rows next to ours: its rates, and whether its ids are ours. */
static void add_peer(json_t *out, json_t *peer, size_t len, size_t nref, uint64_t ref_hash, double seq_best, double seq_med,
                     double seq_cpu)
{
    char h[32];
    snprintf(h, sizeof h, "%016llx", (unsigned long long)ref_hash);
    const char *ph = json_string_value(json_object_get(peer, "ids_hash"));
    json_object_set_new(peer, "same_ids", json_boolean(ph && !strcmp(ph, h) &&
                                                      (size_t)json_integer_value(json_object_get(peer, "tokens")) == nref));
    const char *keys[3] = {"single", "batch_1", "batch"};
    for (int k = 0; k < 3; k++) {
        json_t *r = json_object_get(peer, keys[k]);
        double b = json_real_value(json_object_get(r, "best_s")), m = json_real_value(json_object_get(r, "median_s"));
        if (!r || !(b > 0) || !(m > 0)) continue;
        json_object_set_new(r, "mb_per_s_best", json_real(len / b / 1e6));
        json_object_set_new(r, "mb_per_s_median", json_real(len / m / 1e6));
        json_object_set_new(r, "sequential_over_peer_best", json_real(b / seq_best));
        json_object_set_new(r, "sequential_over_peer_median", json_real(m / seq_med));
        double c = json_real_value(json_object_get(r, "cpu_median_s"));
        if (c > 0 && seq_cpu > 0) json_object_set_new(r, "sequential_over_peer_cpu", json_real(c / seq_cpu));
    }
    json_object_set_new(out, "peer", peer);
}

static void print_text(qs_cli *cli, json_t *out)
{
#define S(o, k) json_string_value(json_object_get(o, k))
#define R(o, k) json_real_value(json_object_get(o, k))
#define I(o, k) (long long)json_integer_value(json_object_get(o, k))
    json_t *m = json_object_get(out, "machine");
    printf("%s%s%s, %lld cores, load average %.2f; text %s, %lld bytes; tokenizer %s, %lld tokens\n", qs_c_bold(cli),
           S(m, "cpu"), qs_c_off(cli), I(m, "cores"), R(m, "loadavg_1min"), S(out, "text"), I(out, "bytes"),
           S(out, "tokenizer"), I(out, "tokens"));
    char ch[80], ov[80];
    if (I(out, "chunk")) snprintf(ch, sizeof ch, "%lld bytes", I(out, "chunk"));
    else snprintf(ch, sizeof ch, "LoPT's default (%d bytes)", QS_LOPT_CHUNK);
    if (I(out, "overlap")) snprintf(ov, sizeof ov, "%lld bytes", I(out, "overlap"));
    else snprintf(ov, sizeof ov, "LoPT's default (%d bytes, less for small chunks)", QS_LOPT_OVERLAP);
    printf("LoPT chunk %s, overlap %s; best and median of %lld runs, interleaved\n", ch, ov, I(out, "reps"));
    printf("%s%-26s %7s %9s %9s %11s %9s %9s %6s  %s%s\n", qs_c_head(cli), "RUN", "THREADS", "MB/s", "MED MB/s", "Mtok/s",
           "SPEEDUP", "MED", "CPU", "LoPT chunks/anchors/regrown/fallback, ids", qs_c_off(cli));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(out, "runs"), i, r) {
        json_t *st = json_object_get(r, "stats");
        char note[160] = "the reference";
        if (!strcmp(S(r, "run"), "sequential+spans")) snprintf(note, sizeof note, "each token's byte span too (LoPT's chunks)");
        if (st)
            snprintf(note, sizeof note, "%lld/%lld/%lld/%lld, equal%s%s", I(st, "chunks"), I(st, "anchors"), I(st, "regrown"),
                     I(st, "fallback"), S(st, "why") ? "; sequential: " : "", S(st, "why") ? S(st, "why") : "");
        printf("%-26s %7lld %9.2f %9.2f %11.3f %8.2fx %8.2fx %5.2fx  %s\n", !strcmp(S(r, "run"), "lopt") ? "LoPT" : S(r, "run"),
               I(r, "threads"), R(r, "mb_per_s_best"), R(r, "mb_per_s_median"), R(r, "tokens_per_s_best") / 1e6,
               R(r, "speedup_best"), R(r, "speedup_median"), R(r, "cpu_over_sequential"), note);
    }
    json_t *mo = json_object_get(out, "model"), *cv = json_object_get(mo, "speedup");
    if (json_is_object(mo) && json_is_true(json_object_get(mo, "fitted")))
        printf("modelled (Amdahl from %lld threads: LoPT's work %.2fx the sequential's, serial fraction %.3f; one core per "
               "thread): 4 threads %.2fx, 8 %.2fx, 16 %.2fx\n", I(mo, "from_threads"), R(mo, "work_over_sequential"),
               R(mo, "serial_fraction"), R(cv, "4"), R(cv, "8"), R(cv, "16"));
    else if (json_is_object(mo))
        printf("model: LoPT's work %.2fx the sequential's; %s, so no curve (docs/scale.md)\n", R(mo, "work_over_sequential"),
               json_is_true(json_object_get(mo, "busy")) ? "the machine was busy before the runs (load average above cores - 1): "
               "the threads' wall time measures the load" : "no serial fraction fits the wall time (the threads lacked cores)");
    json_t *p = json_object_get(out, "peer");
    if (!p) { printf("peer tokenizers: %s\n", S(out, "peer_missing") ? S(out, "peer_missing") : "not asked (--peer tokenizers)"); return; }
    const char *keys[3] = {"single", "batch_1", "batch"};
    for (int k = 0; k < 3; k++) {
        json_t *q = json_object_get(p, keys[k]);
        if (!q) continue;
        char lab[64];
        snprintf(lab, sizeof lab, "tokenizers %s", k ? "encode_batch" : "encode");
        printf("%-26s %7lld %9.2f %9.2f %11.3f %8.2fx %8.2fx %5.2fx  %s\n", lab, I(q, "threads"), R(q, "mb_per_s_best"),
               R(q, "mb_per_s_median"), I(p, "tokens") / R(q, "best_s") / 1e6, 1 / R(q, "sequential_over_peer_best"),
               1 / R(q, "sequential_over_peer_median"), R(q, "sequential_over_peer_cpu"),
               k == 1 ? "paragraphs, RAYON_NUM_THREADS=1" : k ? "paragraphs, rayon's default threads" : (json_is_true(json_object_get(p, "same_ids")) ? "same ids" : "IDS DIFFER"));
    }
    json_t *q = json_object_get(p, "single");
    printf("tokenizers %s: sequential / encode = %.2fx best, %.2fx median, %.2fx by CPU time (must reach >= 1)%s\n",
           S(p, "version"), R(q, "sequential_over_peer_best"), R(q, "sequential_over_peer_median"),
           R(q, "sequential_over_peer_cpu"),
           json_is_true(json_object_get(p, "same_ids")) ? "" : "; its ids differ from qscope's: the texts or tokenizers are not the same");
#undef S
#undef R
#undef I
}

int qs_bench_tokenize(qs_cli *cli, int argc, char **argv)
{
    bopts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    qs_err e = {{0}};
    char *text = NULL;
    size_t len = 0;
    if (o.text ? qs_lopt_read_texts(&o.text, 1, &text, &len, &e) : qs_lopt_read_texts(qs_lopt_austen, QS_LOPT_AUSTEN_N, &text, &len, &e))
        return qs_cli_err(QS_EXIT_ERR, &e);
    const char *name = o.text ? o.text : "the Austen novels";
    const char *src = o.tokenizer ? o.tokenizer : o.model ? o.model : QS_LLM_DEFAULT_MODEL;
    qs_llm_file f;
    memset(&f, 0, sizeof f);
    if (o.tokenizer ? qs_llm_load_tokenizer(src, &f, &e) : qs_llm_load(src, &f, &e)) { free(text); return qs_cli_err(QS_EXIT_ERR, &e); }
    int32_t *ref = NULL;
    size_t nref = 0;
    json_t *out = json_object(), *runs = json_array();
    if (qs_lopt_sequential(&f.v, name, text, len, &ref, &nref, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
    rc = measure(&o, &f.v, name, text, len, ref, nref, runs, out);
    if (rc) goto done;
    json_t *m = json_object();
    machine(m);
    json_object_set_new(out, "machine", m);
    json_object_set_new(out, "text", json_string(o.text ? o.text : "data/text/*.txt (Austen's six novels)"));
    json_object_set_new(out, "bytes", json_integer((json_int_t)len));
    json_object_set_new(out, "tokenizer", json_string(src));
    json_object_set_new(out, "tokens", json_integer((json_int_t)nref));
    char h[32];
    snprintf(h, sizeof h, "%016llx", (unsigned long long)qs_lopt_ids_hash(ref, nref));
    json_object_set_new(out, "ids_hash", json_string(h));
    json_object_set_new(out, "chunk", json_integer((json_int_t)o.chunk));   /* 0: LoPT's default (QS_LOPT_CHUNK) */
    json_object_set_new(out, "overlap", json_integer((json_int_t)o.overlap));   /* 0: LoPT's default */
    json_object_set_new(out, "reps", json_integer(o.reps));
    json_object_set_new(out, "runs", json_incref(runs));
    if (o.peer) {
        char why[600];
        json_t *p = run_peer(&o, o.reps, why, sizeof why);
        json_t *seq = json_array_get(runs, 0);
        if (p) add_peer(out, p, len, nref, qs_lopt_ids_hash(ref, nref), json_real_value(json_object_get(seq, "best_s")),
                        json_real_value(json_object_get(seq, "median_s")), json_real_value(json_object_get(seq, "cpu_median_s")));
        else json_object_set_new(out, "peer_missing", json_string(why));
    }
    if (o.json) {
        char *s = json_dumps(out, JSON_INDENT(2));
        puts(s);
        free(s);
    } else print_text(cli, out);
done:
    json_decref(runs);
    json_decref(out);
    free(ref);
    free(text);
    qs_llm_file_free(&f);
    return rc;
}
