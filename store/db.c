/*
** Opening, configuring and migrating the qscope database (see db.h).
**
** The schema is a list of migrations; migration i moves PRAGMA user_version from i-1 to i inside
** one transaction, so a database is always at a whole version.  Tables are documented in the
** README ("Database schema"); users are expected to query them with sqlite3.
*/
#include "db.h"
#include "io_err.h"
#include "../kernels/qs_version.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>

static const char *const kMigrations[] = {
    /* 0 -> 1: the foundation */
    "CREATE TABLE meta(\n"
    "  key   TEXT PRIMARY KEY,\n"
    "  value TEXT NOT NULL\n"
    ");\n"
    /* One row per imported file (or generator run). */
    "CREATE TABLE source(\n"
    "  id          INTEGER PRIMARY KEY,\n"
    "  path        TEXT NOT NULL UNIQUE,   -- absolute file path, or 'gen:NAME' for generated data\n"
    "  kind        TEXT NOT NULL,          -- npy | npz | safetensors | gguf | generated\n"
    "  size        INTEGER,                -- file size and modification time at import,\n"
    "  mtime_ns    INTEGER,                --   used to detect stale references\n"
    "  metadata    TEXT,                   -- JSON: safetensors __metadata__, GGUF key/values, generator spec\n"
    "  imported_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))\n"
    ");\n"
    "CREATE TABLE tensor(\n"
    "  id          INTEGER PRIMARY KEY,\n"
    "  name        TEXT NOT NULL UNIQUE,   -- 'file:tensor'\n"
    "  source_id   INTEGER NOT NULL REFERENCES source(id) ON DELETE CASCADE,\n"
    "  member      TEXT NOT NULL DEFAULT '', -- name inside the container\n"
    "  dtype       TEXT NOT NULL,          -- storage dtype: f32 f16 bf16 f8_e4m3 ... q8_0 q4_0 ggml_mxfp4 ...\n"
    "  shape       TEXT NOT NULL,          -- JSON array, outermost dimension first\n"
    "  ndim        INTEGER NOT NULL,\n"
    "  numel       INTEGER NOT NULL,\n"
    "  nbytes      INTEGER NOT NULL,       -- bytes in the storage dtype\n"
    "  storage     TEXT NOT NULL CHECK (storage IN ('ref','blob')),\n"
    "  fortran     INTEGER NOT NULL DEFAULT 0, -- ref: bytes are column-major (blobs are always C order)\n"
    "  codec       TEXT NOT NULL DEFAULT 'none' CHECK (codec IN ('none','deflate')),\n"
    "  data_offset INTEGER,                -- ref: byte offset of the data (in the inflated stream for deflate)\n"
    "  comp_offset INTEGER,                -- ref+deflate: compressed member location in the file\n"
    "  comp_size   INTEGER,\n"
    "  hash        TEXT NOT NULL,          -- xxh3-128 of dtype, shape and the C-order bytes (hex)\n"
    "  metadata    TEXT,                   -- JSON, per tensor\n"
    "  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),\n"
    "  updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))\n"
    ");\n"
    "CREATE INDEX tensor_by_hash ON tensor(hash);\n"
    "CREATE INDEX tensor_by_source ON tensor(source_id);\n"
    /* Embedded data: C-order bytes of the storage dtype, QS_CHUNK_BYTES per row. */
    "CREATE TABLE tensor_chunk(\n"
    "  tensor_id INTEGER NOT NULL REFERENCES tensor(id) ON DELETE CASCADE,\n"
    "  seq       INTEGER NOT NULL,\n"
    "  data      BLOB NOT NULL,\n"
    "  UNIQUE (tensor_id, seq)\n"
    ");\n"
    "CREATE TABLE tensor_stats(\n"
    "  tensor_id    INTEGER PRIMARY KEY REFERENCES tensor(id) ON DELETE CASCADE,\n"
    "  n_finite INTEGER, n_nan INTEGER, n_inf INTEGER, n_zero INTEGER,\n"
    "  min REAL, max REAL, mean REAL, std REAL, absmax REAL,\n"
    "  kurtosis     REAL,                  -- Pearson (Gaussian = 3)\n"
    "  zero_frac    REAL,\n"
    "  outlier_frac REAL,                  -- |x - mean| > 6 std\n"
    "  p0_1 REAL, p1 REAL, p5 REAL, p25 REAL, p50 REAL, p75 REAL, p95 REAL, p99 REAL, p99_9 REAL,\n"
    "  rows INTEGER, cols INTEGER,         -- matrix view: leading dims x last dim\n"
    "  row_absmax   TEXT,                  -- JSON {min,median,max,mean,argmax} of per-row absmax\n"
    "  col_absmax   TEXT,                  -- same per column (channel)\n"
    "  top_channels TEXT                   -- JSON [[column, absmax], ...] largest first\n"
    ");\n"
    /* Analysis results, keyed so that a result is reused only for identical inputs. */
    "CREATE TABLE result(\n"
    "  id           INTEGER PRIMARY KEY,\n"
    "  tensor_hash  TEXT NOT NULL,\n"
    "  kind         TEXT NOT NULL,         -- metrics | histogram | blocks | ...\n"
    "  format       TEXT NOT NULL,         -- format spec\n"
    "  options      TEXT NOT NULL DEFAULT '{}', -- JSON, canonical key order\n"
    "  tool_version TEXT NOT NULL,\n"
    "  data         TEXT NOT NULL,         -- JSON\n"
    "  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),\n"
    "  UNIQUE (tensor_hash, kind, format, options, tool_version)\n"
    ");\n"
    /* RL per-token logs (mmlog v1, spec/ais-rl.md §4.2). */
    "CREATE TABLE rl_run(\n"
    "  id         INTEGER PRIMARY KEY,\n"
    "  name       TEXT NOT NULL UNIQUE,\n"
    "  label      TEXT,                    -- e.g. 'precision mismatch without training'\n"
    "  source     TEXT,                    -- file it was imported from\n"
    "  metadata   TEXT,                    -- JSON\n"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))\n"
    ");\n"
    "CREATE TABLE rl_token(\n"
    "  run_id     INTEGER NOT NULL REFERENCES rl_run(id) ON DELETE CASCADE,\n"
    "  step       INTEGER NOT NULL,\n"
    "  seq        INTEGER NOT NULL,\n"
    "  pos        INTEGER NOT NULL,\n"
    "  token_id   INTEGER,\n"
    "  lp_rollout REAL NOT NULL,\n"
    "  lp_train   REAL NOT NULL,\n"
    "  advantage  REAL, reward REAL, grp INTEGER, entropy REAL,\n"
    "  mask       INTEGER NOT NULL DEFAULT 1,\n"
    "  PRIMARY KEY (run_id, step, seq, pos)\n"
    ") WITHOUT ROWID;\n",
    /* 1 -> 2: binary arrays of analysis results (per-block scale codes and errors, per-row/column
    ** errors), kept out of the JSON so large tensors stay cheap to store and read */
    "CREATE TABLE result_blob(\n"
    "  result_id INTEGER NOT NULL REFERENCES result(id) ON DELETE CASCADE,\n"
    "  name      TEXT NOT NULL,            -- scale_code (u8), absmax, ratio, rmse, row_rmse, col_rmse (f32 LE)\n"
    "  data      BLOB NOT NULL,\n"
    "  PRIMARY KEY (result_id, name)\n"
    ");\n"
    "CREATE INDEX result_by_tensor ON result(tensor_hash);\n",
    /* 2 -> 3: the original sequence and group ids of imported RL logs (rl_token keeps per-step
    ** sequence ordinals and per-run group ordinals; store/rl_log.h) */
    "CREATE TABLE rl_seq(\n"
    "  run_id   INTEGER NOT NULL REFERENCES rl_run(id) ON DELETE CASCADE,\n"
    "  step     INTEGER NOT NULL,\n"
    "  seq      INTEGER NOT NULL,            -- rl_token.seq\n"
    "  seq_id   TEXT NOT NULL,               -- as in the log\n"
    "  group_id TEXT,                        -- as in the log (rl_token.grp is its ordinal)\n"
    "  PRIMARY KEY (run_id, step, seq)\n"
    ") WITHOUT ROWID;\n",
    /* 3 -> 4: the rest of a referenced file's identity.  Size and mtime can be put back by hand
    ** (`touch -d`); the status-change time and the inode cannot.  NULL in rows imported before:
    ** still accepted on size and mtime, filled by the next import or `qscope check`. */
    "ALTER TABLE source ADD COLUMN ctime_ns INTEGER;\n"
    "ALTER TABLE source ADD COLUMN inode INTEGER;\n"
    "ALTER TABLE source ADD COLUMN dev INTEGER;\n",
    /* 4 -> 5: training runs of `qscope train` (issue 26; store/train_store.h).  Steps are committed
    ** as they finish, so a stopped run keeps every completed step. */
    "CREATE TABLE train_run(\n"
    "  id           INTEGER PRIMARY KEY,\n"
    "  name         TEXT NOT NULL UNIQUE,\n"
    "  recipe       TEXT NOT NULL,         -- preset name ('fp32', 'hif4', ...; '+op' when --op changed it)\n"
    "  seed         INTEGER NOT NULL,\n"
    "  sweep        TEXT,                  -- the sweep the run belongs to (its seeds share it), or NULL\n"
    "  status       TEXT NOT NULL CHECK (status IN ('running','done','stopped','failed')),\n"
    "  steps        INTEGER NOT NULL,      -- planned\n"
    "  steps_done   INTEGER NOT NULL DEFAULT 0,\n"
    "  val0         REAL,                  -- validation loss before the first step\n"
    "  val_final    REAL,                  -- after the last completed step\n"
    "  model        TEXT NOT NULL,         -- JSON: layers, dim, heads, kv_heads, head_dim, ffn, vocab, ctx, tokenizer, params\n"
    "  options      TEXT NOT NULL,         -- JSON: batch, accum, lr, ..., recipe operands, texts\n"
    "  data_hash    TEXT NOT NULL,         -- xxh3-128 of the training and validation token streams (hex)\n"
    "  tool_version TEXT NOT NULL,\n"
    "  checkpoint   TEXT,                  -- --out directory, or NULL\n"
    "  error        TEXT,                  -- why a failed/stopped run ended\n"
    "  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),\n"
    "  finished_at  TEXT\n"
    ");\n"
    "CREATE TABLE train_step(\n"
    "  run_id     INTEGER NOT NULL REFERENCES train_run(id) ON DELETE CASCADE,\n"
    "  step       INTEGER NOT NULL,        -- 1 .. steps\n"
    "  train_loss REAL, val_loss REAL,     -- val_loss NULL where not measured\n"
    "  grad_norm  REAL, lr REAL, tok_s REAL,\n"
    "  PRIMARY KEY (run_id, step)\n"
    ") WITHOUT ROWID;\n"
    /* per (step, layer, operand) of a recipe run: fractions of the operand's values */
    "CREATE TABLE train_opstat(\n"
    "  run_id    INTEGER NOT NULL REFERENCES train_run(id) ON DELETE CASCADE,\n"
    "  step      INTEGER NOT NULL,\n"
    "  layer     INTEGER NOT NULL,         -- 0 .. layers-1; layers = the output head\n"
    "  operand   TEXT NOT NULL,            -- fwd.x fwd.w dgrad.dy dgrad.w wgrad.dy wgrad.x\n"
    "  n         INTEGER NOT NULL,         -- values quantized in the step\n"
    "  underflow REAL NOT NULL,            -- non-zero inputs that became 0\n"
    "  clipped   REAL NOT NULL,            -- finite inputs beyond the format's range (saturated or made Inf)\n"
    "  nonfinite REAL NOT NULL,            -- NaN/Inf outputs\n"
    "  PRIMARY KEY (run_id, step, layer, operand)\n"
    ") WITHOUT ROWID;\n",
    /* 5 -> 6: per-step metrics of `qscope rl grpo` (issue 27; store/rl_step.h), committed with the step's
    ** rl_token rows, so a stopped run keeps every completed step. */
    "CREATE TABLE rl_step(\n"
    "  run_id      INTEGER NOT NULL REFERENCES rl_run(id) ON DELETE CASCADE,\n"
    "  step        INTEGER NOT NULL,       -- 0 .. steps-1 (= rl_token.step)\n"
    "  reward      REAL,                   -- mean reward of the step's samples (before its update)\n"
    "  reward_std  REAL,\n"
    "  resp_len    REAL,                   -- mean response tokens\n"
    "  entropy     REAL,                   -- mean rollout entropy per response token (nats)\n"
    "  kl_init     REAL,                   -- mean k3 KL of the trainer to the initial policy per token\n"
    "  mismatch_k3 REAL,                   -- mean k3 of rollout vs trainer (qscope ais kl_k3)\n"
    "  weight_mean REAL, weight_zero REAL, -- the correction's per-token weights: mean, share zero\n"
    "  lambda      REAL,                   -- AIS-R lambda as used\n"
    "  loss        REAL, grad_norm REAL,   -- the policy-gradient loss and its gradient norm (before clipping)\n"
    "  sample_s    REAL, train_s REAL,     -- wall time of sampling and of scoring + update\n"
    "  PRIMARY KEY (run_id, step)\n"
    ") WITHOUT ROWID;\n",
    /* 6 -> 7: the rollout's activation-rounding underflow per step of `qscope rl grpo` (issue 27;
    ** store/rl_step.h), committed with the step; only (layer, site)s that rounded something. */
    "CREATE TABLE rl_underflow(\n"
    "  run_id    INTEGER NOT NULL REFERENCES rl_run(id) ON DELETE CASCADE,\n"
    "  step      INTEGER NOT NULL,         -- = rl_step.step\n"
    "  layer     INTEGER NOT NULL,         -- 0 .. layers-1; layers = the output projection (site head_in)\n"
    "  site      TEXT NOT NULL,            -- attn_in attn_out ffn_in ffn_down_in kv head_in\n"
    "  n         INTEGER NOT NULL,         -- non-zero values rounded by the step's rollout (prefill + decoding)\n"
    "  underflow REAL NOT NULL,            -- the share of them that became 0\n"
    "  PRIMARY KEY (run_id, step, layer, site)\n"
    ") WITHOUT ROWID;\n",
};

#define NMIG ((int)(sizeof kMigrations / sizeof kMigrations[0]))

int qs_db_schema_count(void) { return NMIG; }
const char *qs_db_schema_sql(int version)
{
    return version >= 1 && version <= NMIG ? kMigrations[version - 1] : NULL;
}

/* SQLite says only "disk I/O error" or "database or disk is full": add the OS reason in the words of
** every writer (io_err.h).  Its system errno is unreliable by the time the error is read (the
** rollback's own probes of missing journals leave ENOENT), so the file-size limit is recognised from
** the files themselves: one of them has reached it. */
static int near_fsize_limit(const char *path)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_FSIZE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
    static const char *const sfx[] = {"", "-wal", "-journal"};
    char p[4096];
    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
        struct stat st;
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        if (stat(p, &st) == 0 && (rlim_t)st.st_size + 65536 > r.rlim_cur) return 1;
    }
    return 0;
}

static const char *os_reason(qs_db *db, char *buf, size_t cap)
{
    int xc = sqlite3_extended_errcode(db->h), se = sqlite3_system_errno(db->h), err = 0;
    if (xc == SQLITE_FULL) err = ENOSPC;   /* SQLite's unix layer: FULL is ENOSPC (or a short write) */
    else if ((xc & 0xff) != SQLITE_IOERR) return "";
    else if (se == EFBIG || near_fsize_limit(db->path)) err = EFBIG;
    else if (se != 0 && se != ENOENT) err = se;
    else return "";
    char why[128];
    snprintf(buf, cap, ": %s", qs_io_reason(err, why, sizeof why));
    return buf;
}

int qs_db_fail(qs_db *db, qs_err *e, const char *what)
{
    char why[160];
    return qs_fail(e, "%s: database error: %s (%s)%s", db->path, sqlite3_errmsg(db->h), what, os_reason(db, why, sizeof why));
}

int qs_db_begin(qs_db *db, qs_err *e)
{
    /* In WAL mode a connection still holding a read snapshot (an unfinished SELECT, an open blob
    ** handle) cannot become a writer once another process has committed: SQLite answers
    ** SQLITE_BUSY_SNAPSHOT at once and the busy timeout never applies.  Such a write would fail
    ** only under concurrency, so refuse it always (a programming error the tests then catch). */
    for (sqlite3_stmt *s = sqlite3_next_stmt(db->h, NULL); s; s = sqlite3_next_stmt(db->h, s))
        if (sqlite3_stmt_busy(s))
            return qs_fail(e, "%s: internal error: a write transaction was started while a read was still open (%s)",
                           db->path, sqlite3_sql(s) ? sqlite3_sql(s) : "blob");
    /* SQLite has no nested transactions: an inner BEGIN would fail anyway, and an inner COMMIT
    ** would end the outer one early.  Callers nest with a savepoint instead. */
    if (!sqlite3_get_autocommit(db->h))
        return qs_fail(e, "%s: internal error: a write transaction was started inside another", db->path);
    return qs_db_exec(db, "BEGIN IMMEDIATE", e);
}

int qs_db_commit(qs_db *db, qs_err *e) { return qs_db_exec(db, "COMMIT", e); }

void qs_db_rollback(qs_db *db)
{
    /* the caller is already failing with its own message: SQLite's answer would only hide it */
    if (!sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

int qs_db_savepoint(qs_db *db, const char *name, qs_err *e)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SAVEPOINT \"%s\"", name);
    return qs_db_exec(db, sql, e);
}

int qs_db_release(qs_db *db, const char *name, qs_err *e)
{
    char sql[96];
    snprintf(sql, sizeof sql, "RELEASE \"%s\"", name);
    return qs_db_exec(db, sql, e);
}

void qs_db_rollback_to(qs_db *db, const char *name)
{
    char sql[200];
    snprintf(sql, sizeof sql, "ROLLBACK TO \"%s\"; RELEASE \"%s\"", name, name);
    sqlite3_exec(db->h, sql, NULL, NULL, NULL);
}

int qs_db_exec(qs_db *db, const char *sql, qs_err *e)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        char why[160];
        qs_fail(e, "%s: database error: %s%s", db->path, msg ? msg : sqlite3_errmsg(db->h), os_reason(db, why, sizeof why));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

sqlite3_stmt *qs_db_prepare(qs_db *db, const char *sql, qs_err *e)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK) {
        qs_db_fail(db, e, "prepare");
        return NULL;
    }
    return st;
}

static int user_version(qs_db *db, int *v, qs_err *e)
{
    sqlite3_stmt *st = qs_db_prepare(db, "PRAGMA user_version", e);
    if (!st) return -1;
    int rc = sqlite3_step(st);
    *v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : qs_db_fail(db, e, "user_version");
}

static int migrate(qs_db *db, qs_err *e)
{
    int v;
    if (user_version(db, &v, e)) return -1;
    if (v > NMIG)
        return qs_fail(e, "%s: database schema version %d is newer than this qscope understands (%d)",
                       db->path, v, NMIG);
    if (v == NMIG) return 0;
    /* IMMEDIATE: two processes opening a fresh database must not both migrate. */
    if (qs_db_exec(db, "BEGIN IMMEDIATE", e)) return -1;
    if (user_version(db, &v, e)) goto fail;
    for (; v < NMIG; v++) {
        if (qs_db_exec(db, kMigrations[v], e)) goto fail;
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version=%d", v + 1);
        if (qs_db_exec(db, sql, e)) goto fail;
    }
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT OR IGNORE INTO meta(key,value) VALUES('created_by','qscope %s');"
             "INSERT OR REPLACE INTO meta(key,value) VALUES('schema_version','%d');",
             QS_VERSION, NMIG);
    if (qs_db_exec(db, sql, e)) goto fail;
    return qs_db_exec(db, "COMMIT", e);
fail:
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

qs_db *qs_db_open(const char *path, qs_err *e)
{
    qs_db *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) { free(db); qs_fail(e, "out of memory"); return NULL; }
    int rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        qs_fail(e, "%s: cannot open database: %s", path, db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, QS_BUSY_TIMEOUT_MS);
    /* Not a database at all?  Reading the schema tells us before WAL is switched on. */
    if (qs_db_exec(db, "SELECT count(*) FROM sqlite_master", e)) goto fail;
    /* A database from a newer qscope is refused before anything (even the journal mode) changes. */
    int v;
    if (user_version(db, &v, e)) goto fail;
    if (v > NMIG) {
        qs_fail(e, "%s: database schema version %d is newer than this qscope understands (%d)", path, v, NMIG);
        goto fail;
    }
    /* Switching a fresh file to WAL needs an exclusive lock, and SQLite reports a competing
    ** opener as BUSY at once instead of calling the busy handler: retry for a while. */
    for (int tries = 0;; tries++) {
        rc = sqlite3_exec(db->h, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK) break;
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) { qs_db_fail(db, e, "journal mode"); goto fail; }
        if (tries > 3000) { qs_db_fail(db, e, "journal mode (busy)"); goto fail; }
        sqlite3_sleep(10);
    }
    if (qs_db_exec(db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", e)) goto fail;
    if (migrate(db, e)) goto fail;
    return db;
fail:
    qs_db_close(db);
    return NULL;
}

int64_t qs_db_data_version(qs_db *db)
{
    sqlite3_stmt *st = NULL;
    if (!db || sqlite3_prepare_v2(db->h, "PRAGMA data_version", -1, &st, NULL) != SQLITE_OK) return -1;
    int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

void qs_db_close(qs_db *db)
{
    if (!db) return;
    if (db->h) sqlite3_close_v2(db->h);
    free(db->path);
    free(db);
}
