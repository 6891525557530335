/*
** Unit tests for the store's query functions (store/q_*.c) and transaction helpers (store/db.c):
** real rows written by SQL into a fresh database, the plain structs read back (values, order,
** filters, absent statistics as NaN, NULL text columns), empty databases, errors with the
** database named, and transactions (a rollback leaves the database unchanged, a nested begin is
** refused, a savepoint undoes only its own work, a write is refused while a cursor reads).
**
** Every database lives in a mkdtemp directory under $TMPDIR (else P_tmpdir) that teardown removes.
*/
#include "test_util.h"
#include "test_store_util.h"   /* the fixture: a temporary directory with an open database */

#include <ftw.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../../store/db.h"
#include "../../store/q_bench.h"
#include "../../store/q_db.h"
#include "../../store/q_kernels.h"
#include "../../store/q_results.h"
#include "../../store/q_rl.h"
#include "../../store/q_tensors.h"

static void sql(qs_db *db, const char *s)
{
    qs_err e = {{0}};
    if (qs_db_exec(db, s, &e)) fail_msg("%s", e.msg);
}

static int64_t count(qs_db *db, const char *table)
{
    char s[128];
    snprintf(s, sizeof s, "SELECT count(*) FROM %s", table);
    sqlite3_stmt *st = qs_db_prepare(db, s, NULL);
    assert_non_null(st);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Three tensors from two sources: big (stats), small (stats without kurtosis), mid (no stats). */
static void three_tensors(qs_db *db)
{
    sql(db, "INSERT INTO source(id, path, kind) VALUES (1, '/data/a.npz', 'npz'), (2, '/data/b.npy', 'npy');"
            "INSERT INTO tensor(id, name, source_id, dtype, shape, ndim, numel, nbytes, storage, hash) VALUES "
            "(1, 'a:big', 1, 'f32', '[64,64]', 2, 4096, 16384, 'ref', 'h1'),"
            "(2, 'a:small', 1, 'bf16', '[8]', 1, 8, 16, 'ref', 'h2'),"
            "(3, 'b:mid', 2, 'f16', '[4,4,4]', 3, 64, 128, 'blob', 'h3');"
            "INSERT INTO tensor_stats(tensor_id, n_finite, n_nan, n_inf, n_zero, mean, std, absmax, kurtosis, outlier_frac) VALUES "
            "(1, 4096, 0, 0, 0, 0.5, 2.0, 7.5, 3.25, 0.001),"
            "(2, 8, 0, 0, 0, -1.0, 0.25, 1.5, NULL, 0.0);");
}

/* ---- tensors ----------------------------------------------------------------------------- */

static void test_tensors_empty(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    qs_tensor_item *t = (qs_tensor_item *)1;
    size_t n = 99;
    assert_int_equal(qs_tensor_list(f->db, "*", QS_TENSORS_BY_NAME, &t, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(t);
    int64_t c = 5;
    assert_int_equal(qs_tensor_count(f->db, "*", &c, &e), 0);
    assert_int_equal(c, 0);
    int removed = 7;
    assert_int_equal(qs_tensor_delete_glob(f->db, "x*", &removed, &e), 0);
    assert_int_equal(removed, 0);
    int64_t id = 3;
    assert_int_equal(qs_source_id(f->db, "/nowhere", &id, &e), 0);
    assert_int_equal(id, 0);
}

static void test_tensor_list(void **state)
{
    fixture *f = *state;
    three_tensors(f->db);
    qs_err e = {{0}};
    qs_tensor_item *t;
    size_t n;
    assert_int_equal(qs_tensor_list(f->db, "*", QS_TENSORS_BY_NAME, &t, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(t[0].name, "a:big");
    assert_string_equal(t[1].name, "a:small");
    assert_string_equal(t[2].name, "b:mid");
    assert_int_equal(t[0].id, 1);
    assert_string_equal(t[0].dtype, "f32");
    assert_string_equal(t[0].shape, "[64,64]");
    assert_string_equal(t[0].storage, "ref");
    assert_string_equal(t[0].hash, "h1");
    assert_string_equal(t[0].source, "/data/a.npz");
    assert_string_equal(t[2].source, "/data/b.npy");
    assert_int_equal(t[0].numel, 4096);
    assert_int_equal(t[0].nbytes, 16384);
    assert_true(t[0].mean == 0.5 && t[0].std == 2.0 && t[0].absmax == 7.5 && t[0].kurtosis == 3.25);
    assert_true(t[0].outlier_frac == 0.001);
    assert_true(t[1].absmax == 1.5 && isnan(t[1].kurtosis) && t[1].outlier_frac == 0.0);
    assert_true(isnan(t[2].mean) && isnan(t[2].absmax) && isnan(t[2].outlier_frac));
    qs_tensor_items_free(t, n);

    /* orders: largest first, missing statistics last */
    assert_int_equal(qs_tensor_list(f->db, "*", QS_TENSORS_BY_SIZE, &t, &n, &e), 0);
    assert_string_equal(t[0].name, "a:big");
    assert_string_equal(t[1].name, "b:mid");
    assert_string_equal(t[2].name, "a:small");
    qs_tensor_items_free(t, n);
    assert_int_equal(qs_tensor_list(f->db, "*", QS_TENSORS_BY_ABSMAX, &t, &n, &e), 0);
    assert_string_equal(t[0].name, "a:big");
    assert_string_equal(t[1].name, "a:small");
    assert_string_equal(t[2].name, "b:mid");
    qs_tensor_items_free(t, n);
    assert_int_equal(qs_tensor_list(f->db, "*", QS_TENSORS_BY_KURTOSIS, &t, &n, &e), 0);
    assert_string_equal(t[0].name, "a:big");
    assert_string_equal(t[1].name, "a:small");   /* NULL kurtosis ties with none: by name */
    qs_tensor_items_free(t, n);

    /* a glob, the list without sources, the largest */
    assert_int_equal(qs_tensor_list(f->db, "a:*", QS_TENSORS_BY_OUTLIERS, &t, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(t[0].name, "a:big");
    qs_tensor_items_free(t, n);
    assert_int_equal(qs_tensor_list_stats(f->db, "*:mid", &t, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(t[0].name, "b:mid");
    assert_null(t[0].source);
    qs_tensor_items_free(t, n);
    assert_int_equal(qs_tensor_largest(f->db, 2, &t, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(t[0].name, "a:big");
    assert_string_equal(t[1].name, "b:mid");
    qs_tensor_items_free(t, n);

    int64_t c;
    assert_int_equal(qs_tensor_count(f->db, "a:*", &c, &e), 0);
    assert_int_equal(c, 2);
}

static void test_tensor_list_errors(void **state)
{
    fixture *f = *state;
    three_tensors(f->db);
    qs_err e = {{0}};
    qs_tensor_item *t = (qs_tensor_item *)1;
    size_t n = 9;
    assert_int_equal(qs_tensor_list(f->db, "*", (qs_tensor_order)99, &t, &n, &e), -1);
    assert_non_null(strstr(e.msg, "tensor order"));
    sql(f->db, "DROP TABLE tensor_stats");
    memset(&e, 0, sizeof e);
    assert_int_equal(qs_tensor_list(f->db, "*", QS_TENSORS_BY_NAME, &t, &n, &e), -1);
    assert_null(t);
    assert_int_equal(n, 0);
    assert_non_null(strstr(e.msg, "t.db"));          /* the database is named */
    assert_non_null(strstr(e.msg, "tensor_stats"));  /* and what is wrong */
}

static void test_tensor_writes(void **state)
{
    fixture *f = *state;
    three_tensors(f->db);
    sql(f->db, "INSERT INTO tensor_chunk(tensor_id, seq, data) VALUES (3, 0, x'00'), (3, 1, x'01')");
    qs_err e = {{0}};
    assert_int_equal(qs_db_begin(f->db, &e), 0);
    assert_int_equal(qs_tensor_chunks_delete(f->db, 3, &e), 0);
    assert_int_equal(count(f->db, "tensor_chunk"), 0);
    int removed;
    assert_int_equal(qs_tensor_delete_glob(f->db, "a:*", &removed, &e), 0);
    assert_int_equal(removed, 2);
    assert_int_equal(qs_source_delete_empty(f->db, &e), 0);
    assert_int_equal(count(f->db, "source"), 1);
    int64_t id;
    assert_int_equal(qs_source_id(f->db, "/data/b.npy", &id, &e), 0);
    assert_int_equal(id, 2);
    assert_int_equal(qs_source_delete(f->db, id, &e), 0);
    assert_int_equal(count(f->db, "tensor"), 0);   /* cascades */
    assert_int_equal(qs_db_commit(f->db, &e), 0);
    assert_int_equal(count(f->db, "source"), 0);
}

/* ---- results and kernel experiments ------------------------------------------------------- */

static void test_results(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    qs_result_item r;
    int found = 1;
    assert_int_equal(qs_result_latest(f->db, "msd", &r, &found, &e), 0);
    assert_int_equal(found, 0);
    assert_null(r.data);
    int64_t c = 9;
    static const char *const kinds[] = {"llm_eval", "llm_sensitivity"};
    assert_int_equal(qs_result_count(f->db, kinds, 2, &c, &e), 0);
    assert_int_equal(c, 0);
    sql(f->db, "INSERT INTO result(id, tensor_hash, kind, format, options, tool_version, data) VALUES "
               "(1, 'h1', 'msd', 'mxfp8', '{\"k\":1}', '0.4.0', '{\"old\":1}'),"
               "(2, 'h2', 'msd', 'mxfp8', '{\"k\":2}', '0.4.0', '{\"new\":1}'),"
               "(3, 'h1', 'metrics', 'fp8', '{}', '0.4.0', '{}'),"
               "(4, 'h1', 'metrics', 'mxfp4', '{}', '0.4.0', '{}'),"
               "(5, 'h2', 'metrics', 'fp8', '{}', '0.3.0', '{}'),"
               "(6, 'h3', 'llm_eval', '-', '{}', '0.4.0', '{}'),"
               "(7, 'h3', 'llm_sensitivity', '-', '{}', '0.4.0', '{}')");
    assert_int_equal(qs_result_latest(f->db, "msd", &r, &found, &e), 0);
    assert_int_equal(found, 1);
    assert_int_equal(r.id, 2);
    assert_string_equal(r.kind, "msd");
    assert_string_equal(r.tensor_hash, "h2");
    assert_string_equal(r.options, "{\"k\":2}");
    assert_string_equal(r.data, "{\"new\":1}");
    assert_non_null(r.created_at);
    qs_result_item_free(&r);
    assert_null(r.data);
    assert_int_equal(qs_result_by_id(f->db, 1, &r, &found, &e), 0);
    assert_int_equal(found, 1);
    assert_string_equal(r.data, "{\"old\":1}");
    qs_result_item_free(&r);
    assert_int_equal(qs_result_by_id(f->db, 42, &r, &found, &e), 0);
    assert_int_equal(found, 0);
    assert_int_equal(qs_result_count(f->db, kinds, 2, &c, &e), 0);
    assert_int_equal(c, 2);
    assert_int_equal(qs_result_count(f->db, kinds, 1, &c, &e), 0);
    assert_int_equal(c, 1);

    qs_hash_count *h;
    size_t n;
    assert_int_equal(qs_result_count_by_tensor(f->db, "metrics", "0.4.0", &h, &n, &e), 0);
    assert_int_equal(n, 1);   /* h2's metrics are of another version */
    assert_string_equal(h[0].hash, "h1");
    assert_int_equal(h[0].n, 2);
    free(h);
    assert_int_equal(qs_result_count_by_tensor(f->db, "hist", "0.4.0", &h, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(h);

    sql(f->db, "DROP TABLE result_blob; DROP TABLE result");
    assert_int_equal(qs_result_latest(f->db, "msd", &r, &found, &e), -1);
    assert_non_null(strstr(e.msg, "no such table"));
}

static void test_kernel_list(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    qs_kernel_item *k = (qs_kernel_item *)1;
    size_t n = 3;
    assert_int_equal(qs_kernel_list(f->db, &k, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(k);
    sql(f->db, "INSERT INTO result(id, tensor_hash, kind, format, options, tool_version, data) VALUES "
               "(1, 'r1', 'trajectory', 'mxfp4', '{\"run\":\"a\",\"set\":\"ess\"}', '0.4.0', '{\"title\":\"overview\",\"ylabel\":\"k3\"}'),"
               "(2, 'r1', 'trajectory', 'mxfp4', 'not json', '0.4.0', 'not json either'),"
               "(3, 'x', 'msd', 'many', '{\"m\":16}', '0.4.0', '{\"rows\":[]}'),"
               "(4, 'x', 'metrics', 'fp8', '{}', '0.4.0', '{}')");
    assert_int_equal(qs_kernel_list(f->db, &k, &n, &e), 0);
    assert_int_equal(n, 3);   /* metrics are not listed */
    assert_int_equal(k[0].id, 3);   /* by kind ('msd' < 'trajectory'), newest first */
    assert_string_equal(k[0].kind, "msd");
    assert_string_equal(k[0].options, "{\"m\":16}");
    assert_string_equal(k[0].data, "{\"rows\":[]}");
    assert_int_equal(k[1].id, 2);
    assert_null(k[1].title);   /* malformed JSON: absent, not an error */
    assert_null(k[1].run);
    assert_null(k[1].options);   /* trajectories carry no options or data */
    assert_int_equal(k[2].id, 1);
    assert_string_equal(k[2].title, "overview");
    assert_string_equal(k[2].ylabel, "k3");
    assert_string_equal(k[2].run, "a");
    assert_string_equal(k[2].set, "ess");
    assert_string_equal(k[2].format, "mxfp4");
    assert_string_equal(k[2].tensor_hash, "r1");
    qs_kernel_items_free(k, n);
    sql(f->db, "DROP TABLE result_blob; DROP TABLE result");
    k = (qs_kernel_item *)1;
    assert_int_equal(qs_kernel_list(f->db, &k, &n, &e), -1);
    assert_null(k);
    assert_non_null(strstr(e.msg, "no such table"));
}

/* ---- RL runs ------------------------------------------------------------------------------- */

static void two_runs(qs_db *db)
{
    sql(db, "INSERT INTO rl_run(id, name, label, source, metadata) VALUES "
            "(1, 'sim/grpo/x', 'qscope sim grpo', NULL, '{\"seed\":0}'), (2, 'log', NULL, '/logs/a.csv', NULL),"
            "(3, 'empty', NULL, NULL, NULL);"
            "INSERT INTO rl_token(run_id, step, seq, pos, token_id, lp_rollout, lp_train, advantage, reward, grp, entropy, mask) VALUES "
            "(2, 0, 0, 0, 11, -1.0, -1.5, 0.5, 1.0, 0, 0.25, 1),"
            "(2, 0, 0, 1, NULL, -2.0, -2.0, NULL, NULL, NULL, NULL, 0),"
            "(2, 5, 1, 0, 12, -0.5, -0.25, NULL, NULL, 3, NULL, 1),"
            "(1, 2, 0, 0, 1, -1.0, -1.0, NULL, NULL, NULL, NULL, 1);"
            "INSERT INTO rl_seq(run_id, step, seq, seq_id, group_id) VALUES (2, 0, 0, 's-a', 'g-a')");
}

static void test_runs(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    qs_run_item *r = (qs_run_item *)1;
    size_t n = 4;
    assert_int_equal(qs_run_list(f->db, "*", &r, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_null(r);
    two_runs(f->db);
    assert_int_equal(qs_run_list(f->db, "*", &r, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(r[0].name, "empty");
    assert_int_equal(r[0].tokens, 0);
    assert_int_equal(r[0].steps, 0);
    assert_int_equal(r[0].first_step, 0);
    assert_string_equal(r[0].metadata, "{}");
    assert_string_equal(r[1].name, "log");
    assert_string_equal(r[1].label, "");
    assert_string_equal(r[1].source, "/logs/a.csv");
    assert_int_equal(r[1].tokens, 3);
    assert_int_equal(r[1].steps, 2);
    assert_int_equal(r[1].first_step, 0);
    assert_int_equal(r[1].last_step, 5);
    assert_string_equal(r[2].name, "sim/grpo/x");
    assert_string_equal(r[2].metadata, "{\"seed\":0}");
    assert_non_null(r[2].created_at);
    qs_run_items_free(r, n);
    assert_int_equal(qs_run_list(f->db, "sim/*", &r, &n, &e), 0);
    assert_int_equal(n, 1);
    qs_run_items_free(r, n);

    assert_int_equal(qs_run_names(f->db, QS_RUNS_SIMS_LAST, &r, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(r[0].name, "empty");
    assert_string_equal(r[1].name, "log");
    assert_string_equal(r[2].name, "sim/grpo/x");
    assert_int_equal(r[2].tokens, -1);   /* not counted */
    assert_string_equal(r[2].label, "qscope sim grpo");
    qs_run_items_free(r, n);
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('z')");
    assert_int_equal(qs_run_names(f->db, QS_RUNS_BY_NAME, &r, &n, &e), 0);
    assert_int_equal(n, 4);
    assert_string_equal(r[2].name, "sim/grpo/x");
    assert_string_equal(r[3].name, "z");
    qs_run_items_free(r, n);

    int ex = -1;
    assert_int_equal(qs_run_exists(f->db, "log", &ex, &e), 0);
    assert_int_equal(ex, 1);
    assert_int_equal(qs_run_exists(f->db, "lo", &ex, &e), 0);
    assert_int_equal(ex, 0);

    /* a run list that cannot be read fails whole, naming the database */
    sql(f->db, "DROP TABLE rl_seq; DROP TABLE rl_token");
    r = (qs_run_item *)1;
    assert_int_equal(qs_run_list(f->db, "*", &r, &n, &e), -1);
    assert_null(r);
    assert_int_equal(n, 0);
    assert_non_null(strstr(e.msg, "rl_token"));
    assert_non_null(strstr(e.msg, "t.db"));
    assert_int_equal(qs_run_names(f->db, QS_RUNS_BY_NAME, &r, &n, &e), 0);   /* names need no tokens */
    assert_int_equal(n, 4);
    qs_run_items_free(r, n);
}

static void test_rl_cursors(void **state)
{
    fixture *f = *state;
    two_runs(f->db);
    qs_err e = {{0}};
    qs_rl_cursor *c = qs_rl_tokens_open(f->db, "log", &e);
    assert_non_null(c);
    qs_rl_token t;
    assert_int_equal(qs_rl_tokens_next(c, &t, &e), 1);
    assert_int_equal(t.row.step, 0);
    assert_int_equal(t.row.pos, 0);
    assert_int_equal(t.row.token_id, 11);
    assert_int_equal(t.row.grp, 0);
    assert_true(t.row.lp_rollout == -1.0 && t.row.lp_train == -1.5 && t.row.adv == 0.5 && t.row.reward == 1.0);
    assert_true(t.row.entropy == 0.25);
    assert_int_equal(t.row.mask, 1);
    assert_string_equal(t.seq_id, "s-a");
    assert_string_equal(t.group_id, "g-a");
    /* a write cannot start while the cursor reads */
    assert_int_equal(qs_db_begin(f->db, &e), -1);
    assert_non_null(strstr(e.msg, "read was still open"));
    assert_int_equal(qs_rl_tokens_next(c, &t, &e), 1);
    assert_int_equal(t.row.pos, 1);
    assert_int_equal(t.row.token_id, -1);   /* absent */
    assert_int_equal(t.row.grp, -1);
    assert_true(isnan(t.row.adv) && isnan(t.row.reward) && isnan(t.row.entropy));
    assert_int_equal(t.row.mask, 0);
    assert_int_equal(qs_rl_tokens_next(c, &t, &e), 1);
    assert_int_equal(t.row.step, 5);
    assert_int_equal(t.row.seq, 1);
    assert_null(t.seq_id);
    assert_null(t.group_id);
    assert_int_equal(qs_rl_tokens_next(c, &t, &e), 0);
    qs_rl_cursor_close(c);
    assert_int_equal(qs_db_begin(f->db, &e), 0);
    qs_db_rollback(f->db);

    c = qs_rl_tokens_open(f->db, "no such run", &e);
    assert_non_null(c);
    assert_int_equal(qs_rl_tokens_next(c, &t, &e), 0);
    qs_rl_cursor_close(c);

    c = qs_rl_deltas_open(f->db, 2, &e);
    assert_non_null(c);
    qs_rl_delta d;
    assert_int_equal(qs_rl_deltas_next(c, &d, &e), 1);
    assert_true(d.step == 0 && d.seq == 0 && d.delta == -0.5 && d.mask == 1);
    assert_int_equal(qs_rl_deltas_next(c, &d, &e), 1);
    assert_true(d.delta == 0.0 && d.mask == 0);
    assert_int_equal(qs_rl_deltas_next(c, &d, &e), 1);
    assert_true(d.step == 5 && d.seq == 1 && d.delta == 0.25);
    assert_int_equal(qs_rl_deltas_next(c, &d, &e), 0);
    qs_rl_cursor_close(c);
    qs_rl_cursor_close(NULL);

    sql(f->db, "DROP TABLE rl_seq");
    assert_null(qs_rl_tokens_open(f->db, "log", &e));
    assert_non_null(strstr(e.msg, "rl_seq"));
}

/* ---- the database as a whole --------------------------------------------------------------- */

static void test_db_counts_problems(void **state)
{
    fixture *f = *state;
    qs_db_counts c;
    qs_db_count(f->db, &c);
    assert_int_equal(c.tensors, 0);
    assert_int_equal(c.schema_version, QS_SCHEMA_VERSION);
    assert_true(c.file_bytes > 0);
    three_tensors(f->db);
    two_runs(f->db);
    qs_db_count(f->db, &c);
    assert_int_equal(c.sources, 2);
    assert_int_equal(c.tensors, 3);
    assert_int_equal(c.elements, 4096 + 8 + 64);
    assert_int_equal(c.bytes_referenced, 16384 + 16);
    assert_int_equal(c.bytes_embedded, 128);
    assert_int_equal(c.results, 0);
    assert_int_equal(c.rl_runs, 3);
    assert_int_equal(c.rl_tokens, 4);
    qs_err e = {{0}};
    qs_db_problem *p = (qs_db_problem *)1;
    size_t n = 2;
    assert_int_equal(qs_db_problems(f->db, &p, &n, &e), 0);
    assert_int_equal(n, 0);
    /* a tensor whose source is gone (written with foreign keys off) */
    sql(f->db, "PRAGMA foreign_keys=OFF; INSERT INTO tensor(name, source_id, dtype, shape, ndim, numel, nbytes, storage, hash) "
               "VALUES ('orphan', 77, 'f32', '[1]', 1, 1, 4, 'ref', 'h9'); PRAGMA foreign_keys=ON");
    assert_int_equal(qs_db_problems(f->db, &p, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(p[0].what, "foreign key");
    assert_string_equal(p[0].message, "tensor");
    qs_db_problems_free(p, n);
    qs_tensor_item *t;
    assert_int_equal(qs_tensor_list(f->db, "orphan", QS_TENSORS_BY_NAME, &t, &n, &e), 0);
    assert_int_equal(n, 0);   /* listed with its source: it has none */
    assert_int_equal(qs_tensor_list_stats(f->db, "orphan", &t, &n, &e), 0);
    assert_int_equal(n, 1);
    qs_tensor_items_free(t, n);
    /* a count that cannot be read is -1, the others still are */
    sql(f->db, "DROP TABLE rl_seq; DROP TABLE rl_token");
    qs_db_count(f->db, &c);
    assert_int_equal(c.rl_tokens, -1);
    assert_int_equal(c.rl_runs, 3);
    assert_int_equal(c.tensors, 4);
}

static void test_bench_data(void **state)
{
    fixture *f = *state;
    three_tensors(f->db);
    qs_err e = {{0}};
    assert_int_equal(qs_db_begin(f->db, &e), 0);
    assert_int_equal(qs_bench_replicate_tensors(f->db, 8, 3, &e), 0);
    assert_int_equal(qs_bench_rl_runs(f->db, &e), 0);
    assert_int_equal(qs_db_commit(f->db, &e), 0);
    assert_int_equal(count(f->db, "tensor"), 8);
    assert_int_equal(count(f->db, "tensor_stats"), 2 + 2 + 2);   /* both copies hold a:big and a:small */
    int64_t n;
    assert_int_equal(qs_tensor_count(f->db, "bench:copy001/*", &n, &e), 0);
    assert_int_equal(n, 3);
    assert_int_equal(qs_tensor_count(f->db, "bench:copy002/*", &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(count(f->db, "rl_token"), 2 * 50 * 64 * 64);
}

/* ---- transactions -------------------------------------------------------------------------- */

static void test_rollback_leaves_db_unchanged(void **state)
{
    fixture *f = *state;
    three_tensors(f->db);
    qs_err e = {{0}};
    assert_int_equal(qs_db_begin(f->db, &e), 0);
    int removed;
    assert_int_equal(qs_tensor_delete_glob(f->db, "*", &removed, &e), 0);
    assert_int_equal(removed, 3);
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('r')");
    assert_int_equal(count(f->db, "tensor"), 0);
    qs_db_rollback(f->db);
    assert_int_equal(count(f->db, "tensor"), 3);
    assert_int_equal(count(f->db, "tensor_stats"), 2);
    assert_int_equal(count(f->db, "rl_run"), 0);
    qs_db_rollback(f->db);   /* none open: nothing happens */
    assert_int_equal(count(f->db, "tensor"), 3);
    /* a commit keeps */
    assert_int_equal(qs_db_begin(f->db, &e), 0);
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('r')");
    assert_int_equal(qs_db_commit(f->db, &e), 0);
    assert_int_equal(count(f->db, "rl_run"), 1);
    /* a commit without a transaction is an error */
    assert_int_equal(qs_db_commit(f->db, &e), -1);
}

static void test_nested_begin_refused(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    assert_int_equal(qs_db_begin(f->db, &e), 0);
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('outer')");
    assert_int_equal(qs_db_begin(f->db, &e), -1);
    assert_non_null(strstr(e.msg, "inside another"));
    assert_non_null(strstr(e.msg, "t.db"));
    /* the outer transaction is still open and whole */
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('outer2')");
    assert_int_equal(qs_db_commit(f->db, &e), 0);
    assert_int_equal(count(f->db, "rl_run"), 2);
}

static void test_savepoint(void **state)
{
    fixture *f = *state;
    qs_err e = {{0}};
    assert_int_equal(qs_db_begin(f->db, &e), 0);
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('kept')");
    assert_int_equal(qs_db_savepoint(f->db, "file", &e), 0);
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('undone')");
    qs_db_rollback_to(f->db, "file");
    assert_int_equal(qs_db_savepoint(f->db, "file", &e), 0);
    sql(f->db, "INSERT INTO rl_run(name) VALUES ('released')");
    assert_int_equal(qs_db_release(f->db, "file", &e), 0);
    assert_int_equal(qs_db_commit(f->db, &e), 0);
    assert_int_equal(count(f->db, "rl_run"), 2);
    int ex;
    assert_int_equal(qs_run_exists(f->db, "undone", &ex, &e), 0);
    assert_int_equal(ex, 0);
    assert_int_equal(qs_run_exists(f->db, "released", &ex, &e), 0);
    assert_int_equal(ex, 1);
    assert_int_equal(qs_db_release(f->db, "nothing", &e), -1);   /* no such savepoint */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tensors_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_list_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_results, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rl_cursors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_db_counts_problems, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bench_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollback_leaves_db_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_begin_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_savepoint, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
