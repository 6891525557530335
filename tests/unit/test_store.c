/*
** Unit tests for the database (store/db.c, analysis/stats_store.c): opening and migrating it (WAL,
** foreign keys, busy timeout, newer schema and non-SQLite files refused, racing first opens), pruning
** with its cascades, SQL in names, and statistics persistence.  Tensors through the writer and the
** reader: test_tensor_io.c.
*/
#include "test_store_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../../analysis/stats_store.h"
#include "../../store/db.h"
#include "../../store/tensor.h"
#include "../../store/tensor_write.h"

/* ---- database ----------------------------------------------------------------------------- */

static void test_db_open_fresh(void **state)
{
    fixture *f = *state;
    qs_db *db = f->db;
    assert_int_equal(qs_db_schema_count(), QS_SCHEMA_VERSION);
    assert_int_equal(q_int(db, "PRAGMA user_version", 0), QS_SCHEMA_VERSION);
    char *jm = q_text(db, "PRAGMA journal_mode");
    assert_string_equal(jm, "wal");
    free(jm);
    assert_int_equal(q_int(db, "PRAGMA foreign_keys", 0), 1);
    assert_int_equal(q_int(db, "PRAGMA busy_timeout", 0), QS_BUSY_TIMEOUT_MS);
    static const char *const tables[] = {"source", "tensor", "tensor_chunk", "tensor_stats", "result",
                                         "rl_run", "rl_token", "meta"};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        sqlite3_stmt *st = NULL;
        assert_int_equal(sqlite3_prepare_v2(db->h, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?",
                                            -1, &st, NULL), SQLITE_OK);
        sqlite3_bind_text(st, 1, tables[i], -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        if (sqlite3_column_int(st, 0) != 1) fail_msg("table %s missing", tables[i]);
        sqlite3_finalize(st);
    }
    char *sv = q_text(db, "SELECT value FROM meta WHERE key='schema_version'");
    assert_int_equal(atoi(sv), QS_SCHEMA_VERSION);
    free(sv);
}

static void test_db_reopen(void **state)
{
    fixture *f = *state;
    char path[128];
    fpath(f, "re.db", path, sizeof path);
    qs_err e = {{0}};
    qs_db *a = qs_db_open(path, &e);
    if (!a) fail_msg("%s", e.msg);
    char *schema1 = q_text(a, "SELECT group_concat(name || ':' || sql, ';') FROM sqlite_master");
    char *meta1 = q_text(a, "SELECT group_concat(key || '=' || value, ';') FROM meta");
    qs_db_close(a);
    for (int k = 0; k < 2; k++) {
        qs_db *b = qs_db_open(path, &e);
        if (!b) fail_msg("reopen: %s", e.msg);
        assert_int_equal(q_int(b, "PRAGMA user_version", 0), QS_SCHEMA_VERSION);
        char *schema2 = q_text(b, "SELECT group_concat(name || ':' || sql, ';') FROM sqlite_master");
        char *meta2 = q_text(b, "SELECT group_concat(key || '=' || value, ';') FROM meta");
        assert_string_equal(schema1, schema2);
        assert_string_equal(meta1, meta2);
        free(schema2);
        free(meta2);
        qs_db_close(b);
    }
    /* two connections at once (an import and a reader) */
    qs_db *c1 = qs_db_open(path, &e), *c2 = qs_db_open(path, &e);
    assert_non_null(c1);
    assert_non_null(c2);
    qs_db_close(c1);
    qs_db_close(c2);
    free(schema1);
    free(meta1);
    /* a path that cannot be created */
    assert_null(qs_db_open("/nonexistent-qscope-dir/x.db", &e));
    assert_msg(&e, "/nonexistent-qscope-dir/x.db");
}

/* Several connections racing to create and migrate the same fresh database all succeed. */
typedef struct open_arg {
    const char *path;
    int ok;
    qs_err e;
} open_arg;

static void *open_thread(void *p)
{
    open_arg *a = p;
    qs_db *db = qs_db_open(a->path, &a->e);
    a->ok = db != NULL;
    qs_db_close(db);
    return NULL;
}

/* data_version: unchanged by the connection's own reads and writes, changed by another
** connection's commit (the workbench polls it to show what other processes write) */
static void test_db_data_version(void **state)
{
    fixture *f = *state;
    char path[128];
    fpath(f, "dv.db", path, sizeof path);
    qs_err e = {{0}};
    qs_db *a = qs_db_open(path, &e), *b = qs_db_open(path, &e);
    if (!a || !b) fail_msg("%s", e.msg);
    int64_t v0 = qs_db_data_version(a);
    assert_true(v0 >= 0);
    assert_int_equal(qs_db_exec(a, "INSERT INTO meta(key, value) VALUES ('dv-own', '1')", &e), 0);
    assert_true(qs_db_data_version(a) == v0);
    assert_int_equal(qs_db_exec(b, "INSERT INTO meta(key, value) VALUES ('dv-other', '1')", &e), 0);
    assert_true(qs_db_data_version(a) != v0);
    assert_true(qs_db_data_version(NULL) == -1);
    qs_db_close(a);
    qs_db_close(b);
}

static void test_db_concurrent_create(void **state)
{
    fixture *f = *state;
    enum { ROUNDS = 5, NT = 4 };
    for (int round = 0; round < ROUNDS; round++) {
        char path[128], name[32];
        snprintf(name, sizeof name, "race%d.db", round);
        fpath(f, name, path, sizeof path);
        open_arg a[NT];
        pthread_t th[NT];
        for (int i = 0; i < NT; i++) {
            memset(&a[i], 0, sizeof a[i]);
            a[i].path = path;
            assert_int_equal(pthread_create(&th[i], NULL, open_thread, &a[i]), 0);
        }
        for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < NT; i++)
            if (!a[i].ok) fail_msg("round %d, connection %d: %s", round, i, a[i].e.msg);
        qs_err e = {{0}};
        qs_db *db = qs_db_open(path, &e);
        assert_non_null(db);
        assert_int_equal(q_int(db, "PRAGMA user_version", 0), QS_SCHEMA_VERSION);
        assert_int_equal(q_int(db, "SELECT count(*) FROM sqlite_master WHERE name='tensor'", 0), 1);
        qs_db_close(db);
    }
}

static void test_db_newer_refused(void **state)
{
    fixture *f = *state;
    char path[128];
    fpath(f, "new.db", path, sizeof path);
    qs_err e = {{0}};
    qs_db *a = qs_db_open(path, &e);
    assert_non_null(a);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version=%d", QS_SCHEMA_VERSION + 1);
    assert_int_equal(qs_db_exec(a, sql, &e), 0);
    qs_db_close(a);
    assert_null(qs_db_open(path, &e));
    assert_msg(&e, "newer");
    assert_msg(&e, path);
    /* refused, not downgraded */
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), QS_SCHEMA_VERSION + 1);
    sqlite3_finalize(st);
    sqlite3_close(h);
}

static void test_db_not_sqlite(void **state)
{
    fixture *f = *state;
    char path[128], side[160];
    fpath(f, "notes.txt", path, sizeof path);
    size_t len = 5000;
    uint8_t *orig = malloc(len);
    assert_non_null(orig);
    for (size_t i = 0; i < len; i++) orig[i] = (uint8_t)("these are my notes, not a database\n"[i % 35]);
    write_file(path, orig, len);
    int64_t size0, mt0, size1, mt1;
    stat_of(path, &size0, &mt0);
    qs_err e = {{0}};
    assert_null(qs_db_open(path, &e));
    assert_msg(&e, "not a database");
    assert_msg(&e, path);
    size_t len2 = 0;
    uint8_t *now = tu_slurp(path, &len2);
    assert_non_null(now);
    assert_int_equal(len2, len);
    assert_memory_equal(now, orig, len);
    stat_of(path, &size1, &mt1);
    assert_int_equal(mt1, mt0);
    /* no journal files were left next to it */
    static const char *const sfx[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        snprintf(side, sizeof side, "%s%s", path, sfx[i]);
        assert_int_equal(access(side, F_OK), -1);
    }
    free(now);
    free(orig);
    /* shorter than a page, and arbitrary binary: refused too */
    static const uint8_t tiny[] = "hello\n";
    fpath(f, "tiny", path, sizeof path);
    write_file(path, tiny, 6);
    assert_null(qs_db_open(path, &e));
    assert_msg(&e, "not a database");
    now = tu_slurp(path, &len2);
    assert_non_null(now);
    assert_int_equal(len2, 6);
    assert_memory_equal(now, tiny, 6);
    free(now);
    uint8_t bin[8192];
    uint64_t seed = 5;
    for (size_t i = 0; i < sizeof bin; i++) bin[i] = (uint8_t)rnd(&seed);
    fpath(f, "bin", path, sizeof path);
    write_file(path, bin, sizeof bin);
    assert_null(qs_db_open(path, &e));
    now = tu_slurp(path, &len2);
    assert_non_null(now);
    assert_int_equal(len2, sizeof bin);
    assert_memory_equal(now, bin, sizeof bin);
    free(now);
}

/* ---- prune and cascades ------------------------------------------------------------------- */

static void fill_stats(qs_tensor_stats *s, double base)
{
    memset(s, 0, sizeof *s);
    s->n_finite = 10;
    s->n = 10;
    s->min = base;
    s->max = base + 1;
    s->mean = base + 0.5;
    s->std = 0.25;
    s->absmax = fabs(base) + 1;
    s->kurtosis = 3;
    for (int k = 0; k < QS_NPCT; k++) s->pct[k] = base + k * 0.1;
}

static void test_prune(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    int64_t sa, sb;
    assert_int_equal(qs_source_upsert(f->db, "gen:a", "generated", 0, 0, NULL, &sa, &e), 0);
    assert_int_equal(qs_source_upsert(f->db, "gen:b", "generated", 0, 0, NULL, &sb, &e), 0);
    assert_true(sa != sb);
    /* upsert of an existing path keeps its id */
    int64_t again;
    assert_int_equal(qs_source_upsert(f->db, "gen:a", "generated", 1, 2, "{}", &again, &e), 0);
    assert_int_equal(again, sa);

    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t sh = 8;
    qs_tdesc d = desc_of(QS_DT_F32, 1, &sh, 0);
    int64_t ids[5];
    char h[33];
    static const char *const names[5] = {"a0", "a1", "a2", "a3", "b0"};
    for (int i = 0; i < 5; i++) {
        v[0] = (float)i;
        ids[i] = put_blob(f, i < 4 ? sa : sb, names[i], &d, (const uint8_t *)v, sizeof v, h);
        qs_tensor_stats s;
        fill_stats(&s, i);
        if (qs_stats_save(f->db, ids[i], &s, &e)) fail_msg("%s", e.msg);
    }
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_chunk", 0), 5);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_stats", 0), 5);

    int64_t keep[2] = {ids[1], ids[3]};
    int removed = -1;
    if (qs_source_prune(f->db, sa, keep, 2, &removed, &e)) fail_msg("%s", e.msg);
    assert_int_equal(removed, 2);
    char *names_left = q_text(f->db, "SELECT group_concat(name, ',') FROM (SELECT name FROM tensor ORDER BY name)");
    assert_string_equal(names_left, "a1,a3,b0");
    free(names_left);
    char *chunk_ids = q_text(f->db, "SELECT group_concat(t.name, ',') FROM (SELECT tensor_id FROM tensor_chunk"
                                    " ORDER BY tensor_id) c JOIN tensor t ON t.id = c.tensor_id");
    assert_string_equal(chunk_ids, "a1,a3,b0");
    free(chunk_ids);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_chunk WHERE tensor_id NOT IN (SELECT id FROM tensor)", 0), 0);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_stats WHERE tensor_id NOT IN (SELECT id FROM tensor)", 0), 0);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_stats", 0), 3);
    /* the kept tensors still read */
    for (int i = 1; i < 4; i += 2) {
        qs_tensor_rec t;
        qs_treader *r = open_named(f, names[i], &t);
        float x;
        assert_int_equal(qs_treader_read_f32(r, 0, 1, &x, &e), 0);
        assert_true(x == (float)i);
        qs_treader_close(r);
        qs_tensor_rec_free(&t);
    }

    /* keeping nothing empties the source; the other source is untouched */
    if (qs_source_prune(f->db, sa, NULL, 0, &removed, &e)) fail_msg("%s", e.msg);
    assert_int_equal(removed, 2);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor", 0), 1);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_chunk", 0), 1);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_stats", 0), 1);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_stats WHERE tensor_id=?", ids[4]), 1);
    if (qs_source_prune(f->db, sa, NULL, 0, &removed, &e)) fail_msg("%s", e.msg);
    assert_int_equal(removed, 0);

    /* deleting a source cascades through its tensors */
    assert_int_equal(qs_db_exec(f->db, "DELETE FROM source WHERE path='gen:b'", &e), 0);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor", 0), 0);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_chunk", 0), 0);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_stats", 0), 0);
}

/* ---- names with quotes and SQL ------------------------------------------------------------ */

static void test_sql_names(void **state)
{
    fixture *f = *state;
    static const char name[] = "x'); DROP TABLE tensor;--";
    static const char member[] = "m\"'\\; DELETE FROM source;";
    static const char meta[] = "{\"note\":\"it's \\\"quoted\\\"; DROP TABLE meta;--\"}";
    static const char spath[] = "gen:o'neil\"); DROP TABLE source;--";
    qs_err e = {{0}};
    int64_t sid;
    assert_int_equal(qs_source_upsert(f->db, spath, "generated", 0, 0, meta, &sid, &e), 0);
    float v[4] = {1, -2, 3, -4};
    uint64_t sh = 4;
    qs_tdesc d = desc_of(QS_DT_F32, 1, &sh, 0);
    d.name = (char *)member;
    char h[33];
    int64_t id = put_blob(f, sid, name, &d, (const uint8_t *)v, sizeof v, h);
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN"
                                  " ('tensor','source','meta')", 0), 3);

    qs_tensor_rec t;
    qs_treader *r = open_named(f, name, &t);
    assert_int_equal(t.id, id);
    assert_string_equal(t.name, name);
    assert_string_equal(t.member, member);
    assert_string_equal(t.source_path, spath);
    check_f32(r, v, 0, 4);
    qs_treader_close(r);
    qs_tensor_rec_free(&t);

    int64_t fid, fsid;
    char fh[33];
    int fblob;
    assert_int_equal(qs_tensor_find(f->db, name, &fid, fh, &fsid, &fblob, &e), 0);
    assert_int_equal(fid, id);
    assert_string_equal(fh, h);
    assert_int_equal(fsid, sid);
    assert_int_equal(fblob, 1);
    assert_int_equal(qs_tensor_find(f->db, "x' OR '1'='1", &fid, fh, &fsid, &fblob, &e), 0);
    assert_int_equal(fid, 0);
    assert_int_equal(qs_tensor_get(f->db, "x' OR '1'='1", &t, &e), -1);
    assert_msg(&e, "no tensor named");

    /* update in place: same id, new metadata and hash */
    qs_tensor_row row = {.name = name, .member = member, .hash = "00000000000000000000000000000000",
                         .metadata = meta, .source_id = sid, .dtype = QS_DT_F32, .ndim = 1, .shape = &sh,
                         .numel = 4, .nbytes = 16, .is_blob = 1};
    int64_t uid = id;
    assert_int_equal(qs_tensor_put(f->db, &row, &uid, &e), 0);
    assert_int_equal(uid, id);
    assert_int_equal(qs_tensor_get(f->db, name, &t, &e), 0);
    assert_string_equal(t.metadata, meta);
    assert_string_equal(t.hash, row.hash);
    qs_tensor_rec_free(&t);
    /* names stay unique */
    int64_t nid = 0;
    assert_int_equal(qs_tensor_put(f->db, &row, &nid, &e), -1);
    assert_msg(&e, "UNIQUE");
}

/* ---- statistics --------------------------------------------------------------------------- */

static void test_stats_roundtrip(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    int64_t sid;
    assert_int_equal(qs_source_upsert(f->db, "gen:s", "generated", 0, 0, NULL, &sid, &e), 0);
    float v[6] = {0};
    uint64_t sh[2] = {2, 3};
    qs_tdesc d = desc_of(QS_DT_F32, 2, sh, 0);
    char h[33];
    int64_t id = put_blob(f, sid, "st", &d, (const uint8_t *)v, sizeof v, h);

    qs_tensor_stats s, l;
    memset(&s, 0, sizeof s);
    s.n_finite = 1000; s.n_nan = 3; s.n_inf = 2; s.n_zero = 17;
    s.n = s.n_finite + s.n_nan + s.n_inf;
    s.min = -12.5; s.max = 0.1; s.mean = 1.0 / 3.0; s.std = 2.718281828459045; s.absmax = 12.5;
    s.kurtosis = NAN; s.zero_frac = 0.017; s.outlier_frac = 1e-300;
    const double pct[QS_NPCT] = {NAN, -3.25, -1.0 / 7.0, 0, 0.5, 1e-7, 3.0e10, 5.5, NAN};
    memcpy(s.pct, pct, sizeof pct);
    s.rows = 40; s.cols = 25;
    s.row_absmax = (qs_axis_summary){.min = 0.5, .median = 1.25, .max = 12.5, .mean = 1.0 / 3.0, .argmax = 39};
    s.col_absmax = (qs_axis_summary){.min = 0.125, .median = 2, .max = 12.5, .mean = 0.1, .argmax = 7};
    s.ntop = 3;
    s.top_cols[0] = 7;  s.top_cols_absmax[0] = 12.5;
    s.top_cols[1] = 3;  s.top_cols_absmax[1] = 0.1;
    s.top_cols[2] = 24; s.top_cols_absmax[2] = 1.0 / 3.0;
    if (qs_stats_save(f->db, id, &s, &e)) fail_msg("%s", e.msg);
    if (qs_stats_save(f->db, id, &s, &e)) fail_msg("%s", e.msg);   /* saving twice replaces */
    assert_int_equal(q_int(f->db, "SELECT count(*) FROM tensor_stats WHERE tensor_id=?", id), 1);

    int found = 0;
    if (qs_stats_load(f->db, id, &l, &found, &e)) fail_msg("%s", e.msg);
    assert_int_equal(found, 1);
    assert_int_equal(l.n, s.n);
    assert_int_equal(l.n_finite, s.n_finite);
    assert_int_equal(l.n_nan, s.n_nan);
    assert_int_equal(l.n_inf, s.n_inf);
    assert_int_equal(l.n_zero, s.n_zero);
    assert_true(l.min == s.min && l.max == s.max && l.mean == s.mean && l.std == s.std);
    assert_true(l.absmax == s.absmax && l.zero_frac == s.zero_frac && l.outlier_frac == s.outlier_frac);
    assert_true(isnan(l.kurtosis));
    for (int k = 0; k < QS_NPCT; k++) {
        if (isnan(pct[k])) assert_true(isnan(l.pct[k]));
        else if (l.pct[k] != pct[k]) fail_msg("pct[%d] = %.17g, expected %.17g", k, l.pct[k], pct[k]);
    }
    assert_int_equal(l.rows, 40);
    assert_int_equal(l.cols, 25);
    assert_true(memcmp(&l.row_absmax, &s.row_absmax, sizeof s.row_absmax) == 0);
    assert_true(memcmp(&l.col_absmax, &s.col_absmax, sizeof s.col_absmax) == 0);
    assert_int_equal(l.ntop, 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(l.top_cols[k], s.top_cols[k]);
        assert_true(l.top_cols_absmax[k] == s.top_cols_absmax[k]);
    }

    /* without a matrix view */
    memset(&s, 0, sizeof s);
    s.min = s.max = s.mean = s.absmax = NAN;
    for (int k = 0; k < QS_NPCT; k++) s.pct[k] = NAN;
    s.n_nan = s.n = 4;
    if (qs_stats_save(f->db, id, &s, &e)) fail_msg("%s", e.msg);
    if (qs_stats_load(f->db, id, &l, &found, &e)) fail_msg("%s", e.msg);
    assert_int_equal(found, 1);
    assert_int_equal(l.n, 4);
    assert_int_equal(l.rows, 0);
    assert_int_equal(l.ntop, 0);
    assert_true(isnan(l.min) && isnan(l.max) && isnan(l.mean) && isnan(l.absmax));
    for (int k = 0; k < QS_NPCT; k++) assert_true(isnan(l.pct[k]));

    /* no row: found = 0 */
    if (qs_stats_load(f->db, id + 1000, &l, &found, &e)) fail_msg("%s", e.msg);
    assert_int_equal(found, 0);
    /* statistics need their tensor (foreign key) */
    assert_int_equal(qs_stats_save(f->db, id + 1000, &s, &e), -1);
    assert_msg(&e, "FOREIGN KEY");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_db_open_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_db_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_db_data_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_db_concurrent_create, setup, teardown),
        cmocka_unit_test_setup_teardown(test_db_newer_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_db_not_sqlite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sql_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stats_roundtrip, setup, teardown),
    };
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
