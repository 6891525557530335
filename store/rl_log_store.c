/*
** Importing an mmlog v1 file into the database (rl_log.h): the file is mapped, parsed on one
** thread and written on another (batches handed over through a small queue), all inside one
** IMMEDIATE transaction that is rolled back on any error.
*/
#include "rl_log.h"
#include "container.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "../kernels/qs_version.h"
#include "../kernels/qs_clock.h"

#define ROWS_PER_STMT 128
#define NCOLS 12

typedef struct qs_rl_writer {
    qs_db *db;
    int64_t run_id;
    sqlite3_stmt *multi, *one, *seq;
    int per;                  /* rows per multi-row statement */
} qs_rl_writer;
typedef qs_rl_writer writer;

static void bind_row(sqlite3_stmt *st, int base, int64_t run, const qs_rl_row *r)
{
    sqlite3_bind_int64(st, base + 1, run);
    sqlite3_bind_int64(st, base + 2, r->step);
    sqlite3_bind_int64(st, base + 3, r->seq);
    sqlite3_bind_int64(st, base + 4, r->pos);
    if (r->token_id >= 0) sqlite3_bind_int64(st, base + 5, r->token_id); else sqlite3_bind_null(st, base + 5);
    sqlite3_bind_double(st, base + 6, r->lp_rollout);
    sqlite3_bind_double(st, base + 7, r->lp_train);
    if (!isnan(r->adv)) sqlite3_bind_double(st, base + 8, r->adv); else sqlite3_bind_null(st, base + 8);
    if (!isnan(r->reward)) sqlite3_bind_double(st, base + 9, r->reward); else sqlite3_bind_null(st, base + 9);
    if (r->grp >= 0) sqlite3_bind_int64(st, base + 10, r->grp); else sqlite3_bind_null(st, base + 10);
    if (!isnan(r->entropy)) sqlite3_bind_double(st, base + 11, r->entropy); else sqlite3_bind_null(st, base + 11);
    sqlite3_bind_int(st, base + 12, r->mask);
}

static int step_done(writer *w, sqlite3_stmt *st, qs_err *e)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        if ((rc & 0xff) == SQLITE_CONSTRAINT) return qs_fail(e, "duplicate token key (step, sequence, position)");
        return qs_db_fail(w->db, e, "rl_token insert");
    }
    return 0;
}

static int w_rows(void *ctx, const qs_rl_row *r, size_t n, qs_err *e)
{
    writer *w = ctx;
    size_t i = 0;
    size_t per = (size_t)w->per;
    for (; w->multi && i + per <= n; i += per) {
        for (size_t k = 0; k < per; k++) bind_row(w->multi, (int)k * NCOLS, w->run_id, &r[i + k]);
        if (step_done(w, w->multi, e)) return -1;
    }
    for (; i < n; i++) {
        bind_row(w->one, 0, w->run_id, &r[i]);
        if (step_done(w, w->one, e)) return -1;
    }
    return 0;
}

static int w_seq(void *ctx, int64_t step, int64_t seq, const char *seq_id, const char *group_id, qs_err *e)
{
    writer *w = ctx;
    sqlite3_bind_int64(w->seq, 1, w->run_id);
    sqlite3_bind_int64(w->seq, 2, step);
    sqlite3_bind_int64(w->seq, 3, seq);
    sqlite3_bind_text(w->seq, 4, seq_id, -1, SQLITE_TRANSIENT);
    if (group_id) sqlite3_bind_text(w->seq, 5, group_id, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(w->seq, 5);
    int rc = sqlite3_step(w->seq);
    sqlite3_reset(w->seq);
    return rc == SQLITE_DONE ? 0 : qs_db_fail(w->db, e, "rl_seq insert");
}

/* ---- two-thread pipeline: the parser fills batches, the writer drains them ----------------- */

#define QDEPTH 8
#define QBATCH 65536

typedef struct qitem {
    int kind;                 /* 0 rows, 1 seq */
    size_t n;
    qs_rl_row *rows;
    int64_t step, seq;
    char *sid, *gid;
} qitem;

typedef struct pipe_t {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* rows accumulate in cur (parser side) and are queued as a whole batch */
    qs_rl_row *cur;
    size_t ncur;
    /* a queue of batches and sequence records */
    qitem *q;
    size_t qcap, qhead, qn;
    size_t nbatches_queued;
    int done, failed;
    qs_err err;               /* writer's error */
    writer *w;
} pipe_t;

static int q_push(pipe_t *P, qitem it, qs_err *e)
{
    pthread_mutex_lock(&P->mu);
    while (it.kind == 0 && P->nbatches_queued >= QDEPTH && !P->failed) pthread_cond_wait(&P->cv, &P->mu);
    if (P->failed) {
        pthread_mutex_unlock(&P->mu);
        free(it.rows); free(it.sid); free(it.gid);
        *e = P->err;
        return -1;
    }
    if (P->qn == P->qcap) {
        size_t nc = P->qcap ? P->qcap * 2 : 256;
        qitem *nq = malloc(nc * sizeof *nq);
        if (!nq) { pthread_mutex_unlock(&P->mu); free(it.rows); free(it.sid); free(it.gid); return qs_fail(e, "out of memory"); }
        for (size_t i = 0; i < P->qn; i++) nq[i] = P->q[(P->qhead + i) % P->qcap];
        free(P->q);
        P->q = nq;
        P->qcap = nc;
        P->qhead = 0;
    }
    P->q[(P->qhead + P->qn) % P->qcap] = it;
    P->qn++;
    if (it.kind == 0) P->nbatches_queued++;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    return 0;
}

static int p_flush(pipe_t *P, qs_err *e)
{
    if (!P->ncur) return 0;
    qitem it = {0, P->ncur, P->cur, 0, 0, NULL, NULL};
    P->cur = NULL;
    P->ncur = 0;
    return q_push(P, it, e);
}

static int p_rows(void *ctx, const qs_rl_row *r, size_t n, qs_err *e)
{
    pipe_t *P = ctx;
    while (n) {
        if (!P->cur && !(P->cur = malloc(QBATCH * sizeof *P->cur))) return qs_fail(e, "out of memory");
        size_t k = QBATCH - P->ncur < n ? QBATCH - P->ncur : n;
        memcpy(P->cur + P->ncur, r, k * sizeof *r);
        P->ncur += k;
        r += k;
        n -= k;
        if (P->ncur == QBATCH && p_flush(P, e)) return -1;
    }
    return 0;
}

static int p_seq(void *ctx, int64_t step, int64_t seq, const char *sid, const char *gid, qs_err *e)
{
    pipe_t *P = ctx;
    /* rows already parsed go first, so the writer sees everything in file order */
    if (p_flush(P, e)) return -1;
    qitem it = {1, 0, NULL, step, seq, strdup(sid), gid ? strdup(gid) : NULL};
    if (!it.sid || (gid && !it.gid)) { free(it.sid); free(it.gid); return qs_fail(e, "out of memory"); }
    return q_push(P, it, e);
}

static void *writer_main(void *arg)
{
    pipe_t *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        while (!P->qn && !P->done) pthread_cond_wait(&P->cv, &P->mu);
        if (!P->qn && P->done) { pthread_mutex_unlock(&P->mu); break; }
        qitem it = P->q[P->qhead];
        P->qhead = (P->qhead + 1) % P->qcap;
        P->qn--;
        int stop = P->failed;
        pthread_mutex_unlock(&P->mu);
        int rc = 0;
        if (!stop) {
            if (it.kind == 0) rc = w_rows(P->w, it.rows, it.n, &P->err);
            else rc = w_seq(P->w, it.step, it.seq, it.sid, it.gid, &P->err);
        }
        free(it.rows); free(it.sid); free(it.gid);
        pthread_mutex_lock(&P->mu);
        if (it.kind == 0) P->nbatches_queued--;
        if (rc) P->failed = 1;
        pthread_cond_broadcast(&P->cv);
        pthread_mutex_unlock(&P->mu);
    }
    return NULL;
}

static int prepare_writer(qs_db *db, writer *w, qs_err *e)
{
    /* as many rows per statement as the SQLite build allows bound parameters for (128 x 12 needs
    ** SQLITE_MAX_VARIABLE_NUMBER >= 1536, the default since 3.32) */
    char sql[ROWS_PER_STMT * 32 + 64];
    for (int per = ROWS_PER_STMT; per >= 8 && !w->multi; per /= 2) {
        size_t L = (size_t)snprintf(sql, sizeof sql, "INSERT INTO rl_token VALUES");
        for (int k = 0; k < per; k++)
            L += (size_t)snprintf(sql + L, sizeof sql - L, "%s(?,?,?,?,?,?,?,?,?,?,?,?)", k ? "," : "");
        if (sqlite3_prepare_v2(db->h, sql, -1, &w->multi, NULL) != SQLITE_OK) { sqlite3_finalize(w->multi); w->multi = NULL; }
        else w->per = per;
    }
    if (!(w->one = qs_db_prepare(db, "INSERT INTO rl_token VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", e))) return -1;
    if (!(w->seq = qs_db_prepare(db, "INSERT INTO rl_seq(run_id, step, seq, seq_id, group_id) VALUES(?,?,?,?,?)", e))) return -1;
    return 0;
}

qs_rl_writer *qs_rl_writer_open(qs_db *db, int64_t run_id, qs_err *e)
{
    writer *w = calloc(1, sizeof *w);
    if (!w) { qs_fail(e, "out of memory"); return NULL; }
    w->db = db;
    w->run_id = run_id;
    if (prepare_writer(db, w, e)) { qs_rl_writer_close(w); return NULL; }
    return w;
}

int qs_rl_writer_rows(qs_rl_writer *w, const qs_rl_row *rows, size_t n, qs_err *e) { return w_rows(w, rows, n, e); }

void qs_rl_writer_close(qs_rl_writer *w)
{
    if (!w) return;
    sqlite3_finalize(w->multi);
    sqlite3_finalize(w->one);
    sqlite3_finalize(w->seq);
    free(w);
}

int qs_rl_run_create(qs_db *db, const char *name, const char *label, const char *source, const char *metadata,
                     int replace, int64_t *run_id, qs_err *e)
{
    int found;
    if (replace) { if (qs_rl_run_delete(db, name, &found, e)) return -1; }
    sqlite3_stmt *st = qs_db_prepare(db, "INSERT INTO rl_run(name, label, source, metadata) VALUES(?,?,?,?) RETURNING id", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    if (label) sqlite3_bind_text(st, 2, label, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, 2);
    if (source) sqlite3_bind_text(st, 3, source, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, 3);
    sqlite3_bind_text(st, 4, metadata ? metadata : "{}", -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *run_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW) return 0;
    if ((rc & 0xff) == SQLITE_CONSTRAINT) return qs_fail(e, "a run named '%s' exists already", name);
    return qs_db_fail(db, e, "rl_run insert");
}

/* ---- import ---------------------------------------------------------------------------------- */

int qs_rl_run_delete(qs_db *db, const char *name, int *found, qs_err *e)
{
    *found = 0;
    sqlite3_stmt *st = qs_db_prepare(db, "SELECT id FROM rl_run WHERE name=?", e);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    int64_t id = -1;
    if (sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (id < 0) return 0;
    *found = 1;
    /* explicit deletes (rl_token is large; the cascade would do the same work) */
    static const char *const sql[] = {"DELETE FROM rl_token WHERE run_id=?", "DELETE FROM rl_seq WHERE run_id=?",
                                      "DELETE FROM rl_run WHERE id=?"};
    for (int i = 0; i < 3; i++) {
        if (!(st = qs_db_prepare(db, sql[i], e))) return -1;
        sqlite3_bind_int64(st, 1, id);
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) return qs_db_fail(db, e, "run delete");
    }
    return 0;
}

static void default_run_name(const char *path, char *out, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, cap, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = 0;
}

int qs_rl_import(qs_db *db, const char *path, const qs_rl_import_opts *o, qs_rl_import_result *res, qs_err *e)
{
    memset(res, 0, sizeof *res);
    double t0 = qs_now_s();
    if (o->run) snprintf(res->run, sizeof res->run, "%s", o->run);
    else default_run_name(path, res->run, sizeof res->run);
    if (!res->run[0]) return qs_fail(e, "%s: empty run name", path);

    int fd = qs_open_regular(path, e);   /* a FIFO would block a plain open */
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb)) { close(fd); return qs_fail(e, "%s: not a regular file", path); }
    size_t n = (size_t)sb.st_size;
    const char *data = "";
    void *map = NULL;
    if (n) {
        map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) { close(fd); return qs_fail(e, "%s: cannot map: %s", path, strerror(errno)); }
        madvise(map, n, MADV_SEQUENTIAL);
        data = map;
    }
    close(fd);
    res->bytes = n;
    char hex[33];
    XXH128_hash_t fh = XXH3_128bits(data, n);
    snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)fh.high64, (unsigned long long)fh.low64);

    writer w = {db, -1, NULL, NULL, NULL, 0};
    pipe_t P;
    memset(&P, 0, sizeof P);
    pthread_mutex_init(&P.mu, NULL);
    pthread_cond_init(&P.cv, NULL);
    P.w = &w;
    int began = 0, rc = -1, thr = 0;
    pthread_t th;
    char abspath[4096];
    if (!realpath(path, abspath)) snprintf(abspath, sizeof abspath, "%s", path);

    /* a large page cache keeps the B-tree's right edge from being spilled to the WAL and rewritten
    ** many times during one big transaction (256 MiB at most; SQLite allocates it lazily) */
    sqlite3_exec(db->h, "PRAGMA cache_size=-262144", NULL, NULL, NULL);
    if (qs_db_begin(db, e)) goto out;
    began = 1;
    {
        int found;
        sqlite3_stmt *st = qs_db_prepare(db, "SELECT id FROM rl_run WHERE name=?", e);
        if (!st) goto out;
        sqlite3_bind_text(st, 1, res->run, -1, SQLITE_TRANSIENT);
        found = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
        if (found && !o->replace) {
            qs_fail(e, "%s: a run named '%s' exists already (use --run NAME, or --replace)", path, res->run);
            goto out;
        }
        if (found && qs_rl_run_delete(db, res->run, &found, e)) goto out;
        st = qs_db_prepare(db, "INSERT INTO rl_run(name, label, source, metadata) VALUES(?,?,?,'{}') RETURNING id", e);
        if (!st) goto out;
        sqlite3_bind_text(st, 1, res->run, -1, SQLITE_TRANSIENT);
        if (o->label) sqlite3_bind_text(st, 2, o->label, -1, SQLITE_TRANSIENT); else sqlite3_bind_null(st, 2);
        sqlite3_bind_text(st, 3, abspath, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_ROW) { sqlite3_finalize(st); qs_db_fail(db, e, "rl_run insert"); goto out; }
        w.run_id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    if (prepare_writer(db, &w, e)) goto out;
    if (pthread_create(&th, NULL, writer_main, &P)) { qs_fail(e, "cannot start the writer thread"); goto out; }
    thr = 1;
    {
        qs_rl_sink sink = {&P, p_rows, p_seq};
        int prc = qs_rl_parse(data, n, &sink, &res->info, e);
        if (!prc) prc = p_flush(&P, e);
        pthread_mutex_lock(&P.mu);
        P.done = 1;
        if (prc) P.failed = 1;
        pthread_cond_broadcast(&P.cv);
        pthread_mutex_unlock(&P.mu);
        pthread_join(th, NULL);
        thr = 0;
        free(P.cur);
        P.cur = NULL;
        if (prc) { qs_err_prefix(e, path); goto out; }
        if (P.failed) { *e = P.err; qs_err_prefix(e, path); goto out; }
    }
    {
        /* metadata: header line, file facts */
        json_t *m = json_object();
        json_object_set_new(m, "schema", json_string("mmlog-v1"));
        json_object_set_new(m, "encoding", json_string(res->info.format == QS_RL_CSV ? "csv" : "jsonl"));
        json_object_set_new(m, "file_xxh3_128", json_string(hex));
        json_object_set_new(m, "file_bytes", json_integer((json_int_t)n));
        json_object_set_new(m, "tokens", json_integer((json_int_t)res->info.tokens));
        json_object_set_new(m, "sequences", json_integer((json_int_t)res->info.seqs));
        json_object_set_new(m, "steps", json_integer((json_int_t)res->info.steps));
        json_object_set_new(m, "groups", json_integer((json_int_t)res->info.groups));
        json_object_set_new(m, "far_tokens", json_integer((json_int_t)res->info.n_far));
        json_object_set_new(m, "tool_version", json_string(QS_VERSION));
        if (res->info.header_json) {
            json_t *h = json_loads(res->info.header_json, 0, NULL);
            if (h) json_object_set_new(m, "header", h);
        }
        char *mj = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(m);
        sqlite3_stmt *st = mj ? qs_db_prepare(db, "UPDATE rl_run SET metadata=? WHERE id=?", e) : NULL;
        if (!st) { free(mj); if (!mj) qs_fail(e, "out of memory"); goto out; }
        sqlite3_bind_text(st, 1, mj, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, w.run_id);
        int src = sqlite3_step(st);
        sqlite3_finalize(st);
        free(mj);
        if (src != SQLITE_DONE) { qs_db_fail(db, e, "rl_run metadata"); goto out; }
    }
    sqlite3_finalize(w.multi); sqlite3_finalize(w.one); sqlite3_finalize(w.seq);
    w.multi = w.one = w.seq = NULL;
    if (qs_db_commit(db, e)) goto out;
    began = 0;
    rc = 0;
    res->run_id = w.run_id;
out:
    if (thr) {
        pthread_mutex_lock(&P.mu);
        P.done = P.failed = 1;
        pthread_cond_broadcast(&P.cv);
        pthread_mutex_unlock(&P.mu);
        pthread_join(th, NULL);
    }
    while (P.qn) { qitem *it = &P.q[P.qhead]; free(it->rows); free(it->sid); free(it->gid); P.qhead = (P.qhead + 1) % P.qcap; P.qn--; }
    free(P.q);
    free(P.cur);
    sqlite3_finalize(w.multi); sqlite3_finalize(w.one); sqlite3_finalize(w.seq);
    if (began) qs_db_rollback(db);
    pthread_mutex_destroy(&P.mu);
    pthread_cond_destroy(&P.cv);
    if (map) munmap(map, n);
    qs_rl_parse_info_free(&res->info);
    res->seconds = qs_now_s() - t0;
    return rc;
}
