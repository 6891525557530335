/*
** Tests of the mmlog v1 parser and importer (store/rl_log.c, store/rl_log_store.c): the number
** scanner against strtod, CSV and JSONL field handling, every rejection rule with its line number,
** and the importer's all-or-nothing transaction.
*/
#include "test_util.h"

#include <math.h>
#include <sqlite3.h>
#include <unistd.h>

#include "../../store/db.h"
#include "../../store/rl_log.h"

typedef struct coll {
    qs_rl_row r[256];
    size_t n;
    char ids[64][32];
    char gids[64][32];
    int nseq;
} coll;

static int c_rows(void *ctx, const qs_rl_row *r, size_t n, qs_err *e)
{
    (void)e;
    coll *c = ctx;
    for (size_t i = 0; i < n && c->n < 256; i++) c->r[c->n++] = r[i];
    return 0;
}

static int c_seq(void *ctx, int64_t step, int64_t seq, const char *id, const char *gid, qs_err *e)
{
    (void)e; (void)step; (void)seq;
    coll *c = ctx;
    if (c->nseq < 64) {
        snprintf(c->ids[c->nseq], 32, "%s", id);
        snprintf(c->gids[c->nseq], 32, "%s", gid ? gid : "(null)");
        c->nseq++;
    }
    return 0;
}

static int parse(const char *text, coll *c, qs_rl_parse_info *info, qs_err *e)
{
    memset(c, 0, sizeof *c);
    qs_rl_sink s = {c, c_rows, c_seq};
    return qs_rl_parse(text, strlen(text), &s, info, e);
}

static void test_scan_double(void **state)
{
    (void)state;
    uint64_t x = 88172645463325252ull;
    char buf[64];
    const char *fmts[] = {"%.17g", "%.6g", "%.3e", "%.12f", "%.1f", "%.20e", "%g"};
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        double v;
        uint64_t bits = x;
        memcpy(&v, &bits, 8);
        if (!isfinite(v) || fabs(v) > 1e300 || (fabs(v) < 1e-300 && v != 0)) v = (double)(int64_t)x / 1e10 * (i % 2 ? -1 : 1);
        snprintf(buf, sizeof buf, fmts[i % 7], v);
        double got, want = strtod(buf, NULL);
        const char *nx;
        int rc = qs_rl_scan_double(buf, buf + strlen(buf), &got, &nx);
        if (!isfinite(want)) { assert_int_equal(rc, 1); continue; }
        assert_int_equal(rc, 0);
        assert_ptr_equal(nx, buf + strlen(buf));
        if (memcmp(&got, &want, 8) != 0) fail_msg("'%s': got %.17g want %.17g", buf, got, want);
    }
    static const struct { const char *s; int rc; double v; } cases[] = {
        {"0", 0, 0}, {"-0", 0, -0.0}, {".5", 0, 0.5}, {"5.", 0, 5}, {"-1e-3", 0, -1e-3}, {"1E+2", 0, 100},
        {"0.000000000000000000000000001", 0, 1e-27}, {"123456789012345678901234567890", 0, 1.2345678901234568e29},
        {"nan", 1, NAN}, {"NaN", 1, NAN}, {"-Infinity", 1, -INFINITY}, {"inf", 1, INFINITY}, {"1e400", 1, INFINITY},
        {"", -1, 0}, {"-", -1, 0}, {"e5", -1, 0}, {"1e", -1, 0}, {"abc", -1, 0}, {".", -1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double v = 12345;
        const char *nx, *s = cases[i].s;
        int rc = qs_rl_scan_double(s, s + strlen(s), &v, &nx);
        assert_int_equal(rc, cases[i].rc);
        if (rc == 0) {
            assert_true(v == cases[i].v);
            assert_int_equal(signbit(v) != 0, signbit(cases[i].v) != 0);
        }
    }
}

static void test_csv_fields(void **state)
{
    (void)state;
    const char *csv =
        "\xEF\xBB\xBFstep,seq_id,group_id,tok_idx,lp_rollout,lp_train,adv,reward,entropy,mask,extra\r\n"
        "3,a,g1,0,-0.5,-0.25,1.5,1,0.3,1,zz\r\n"
        "3,a,g1,2,-1,-1e-7,,,,0,zz\r\n"
        "\r\n"
        "3,b,g2,0,-2,-2,-0.5,0,,,zz\r\n"
        "4,a,g1,5,0,0.0000005,,,,1,zz\r\n";
    coll c;
    qs_rl_parse_info info;
    qs_err e = {{0}};
    assert_int_equal(parse(csv, &c, &info, &e), 0);
    assert_int_equal(info.format, QS_RL_CSV);
    assert_int_equal(info.tokens, 4);
    assert_int_equal(info.seqs, 3);
    assert_int_equal(info.steps, 2);
    assert_int_equal(info.groups, 2);
    assert_int_equal(c.n, 4);
    /* row 0 */
    assert_int_equal(c.r[0].step, 3); assert_int_equal(c.r[0].seq, 0); assert_int_equal(c.r[0].pos, 0);
    assert_true(c.r[0].lp_rollout == -0.5 && c.r[0].lp_train == -0.25 && c.r[0].adv == 1.5 && c.r[0].reward == 1);
    assert_true(c.r[0].entropy == 0.3 && c.r[0].mask == 1 && c.r[0].grp == 0 && c.r[0].token_id == -1);
    /* row 1: empty adv/entropy absent, reward broadcast from the sequence's first row, mask 0 */
    assert_int_equal(c.r[1].pos, 2);
    assert_true(isnan(c.r[1].adv) && isnan(c.r[1].entropy) && c.r[1].reward == 1 && c.r[1].mask == 0);
    /* row 2: second sequence of step 3, group 1, mask default 1 */
    assert_int_equal(c.r[2].seq, 1); assert_int_equal(c.r[2].grp, 1); assert_int_equal(c.r[2].mask, 1);
    /* row 3: step 4's first sequence has ordinal 0; a tiny positive log-prob is tolerated */
    assert_int_equal(c.r[3].step, 4); assert_int_equal(c.r[3].seq, 0); assert_int_equal(c.r[3].grp, 0);
    assert_true(c.r[3].lp_train == 5e-7);
    assert_int_equal(c.nseq, 3);
    assert_string_equal(c.ids[1], "b");
    assert_string_equal(c.gids[1], "g2");
}

static void test_jsonl_fields(void **state)
{
    (void)state;
    const char *js =
        "{\"schema\":\"mmlog-v1\",\"framework\":\"verl\",\"C\":2}\n"
        "{\"step\":1,\"seq_id\":\"x\\\"y\",\"group_id\":null,\"reward\":0.5,\"adv\":-1.25,"
        "\"lp_rollout\":[-1,-2],\"lp_train\":[-1.5,-2],\"token_ids\":[7,9],\"nested\":{\"a\":[1,{\"b\":null}],\"c\":\"}\"}}\n"
        "  {\"seq\":12,\"step\":1,\"lp_train\":[-0.1],\"lp_rollout\":[-0.2],\"mask\":[false],\"entropy\":[null],"
        "\"adv\":[0.75],\"group_id\":4}  \n";
    coll c;
    qs_rl_parse_info info;
    qs_err e = {{0}};
    assert_int_equal(parse(js, &c, &info, &e), 0);
    assert_int_equal(info.format, QS_RL_JSONL);
    assert_non_null(info.header_json);
    assert_non_null(strstr(info.header_json, "\"framework\":\"verl\""));
    qs_rl_parse_info_free(&info);
    assert_int_equal(c.n, 3);
    assert_true(c.r[0].adv == -1.25 && c.r[1].adv == -1.25);            /* scalar broadcast */
    assert_true(c.r[0].reward == 0.5 && c.r[1].reward == 0.5);
    assert_int_equal(c.r[0].token_id, 7); assert_int_equal(c.r[1].token_id, 9);
    assert_int_equal(c.r[0].grp, -1);
    assert_int_equal(c.r[1].pos, 1);
    assert_true(c.r[1].lp_rollout == -2 && c.r[1].lp_train == -2);
    assert_string_equal(c.ids[0], "x\"y");
    assert_string_equal(c.gids[0], "(null)");
    assert_int_equal(c.r[2].seq, 1);
    assert_int_equal(c.r[2].mask, 0);
    assert_true(isnan(c.r[2].entropy) && c.r[2].adv == 0.75 && isnan(c.r[2].reward));
    assert_int_equal(c.r[2].grp, 0);
    assert_string_equal(c.ids[1], "12");
    assert_string_equal(c.gids[1], "4");
}

static void expect_error(const char *text, const char *needle)
{
    coll c;
    qs_rl_parse_info info;
    qs_err e = {{0}};
    assert_int_equal(parse(text, &c, &info, &e), -1);
    if (!strstr(e.msg, needle)) fail_msg("expected '%s' in '%s'", needle, e.msg);
    assert_null(info.header_json);
}

static void test_errors(void **state)
{
    (void)state;
    const char *H = "step,seq_id,tok_idx,lp_rollout,lp_train\n";
    char b[512];
#define E(body, needle) do { snprintf(b, sizeof b, "%s%s", H, body); expect_error(b, needle); } while (0)
    E("0,a,0,-1,-1\n0,a,1,-1,nan\n", "line 3: lp_train is NaN");
    E("0,a,0,-1,-1\n0,a,1,inf,-1\n", "line 3: lp_rollout is infinite");
    E("0,a,0,-1,0.01\n", "line 2: lp_train = 0.01 is positive");
    E("0,a,0,-1,-1\n0,a,0,-1,-1\n", "line 3: duplicate token");
    E("0,a,1,-1,-1\n0,a,0,-1,-1\n", "line 3: tok_idx 0 after 1");
    E("0,a,0,-1,-1\n0,b,0,-1,-1\n0,a,1,-1,-1\n", "line 4: duplicate sequence");
    E("0,a,0,-1,-1\n0,a,1,-1", "line 3: truncated last line");
    E("0,a,0,-1\n0,a,1,-1,-1\n", "line 2: 4 fields where the header has 5");
    E("x,a,0,-1,-1\n", "line 2: step 'x' is not a non-negative integer");
    E("-1,a,0,-1,-1\n", "line 2: step '-1'");
    E("1.5,a,0,-1,-1\n", "line 2: step '1.5'");
    E("0,,0,-1,-1\n", "line 2: seq_id is empty");
    E("0,a,0,-1,--1\n", "line 2: lp_train '--1' is not a number");
    E("0,a,0,-1,-1 x\n", "is not a number");
    E("0,a\x01z,0,-1,-1\n", "line 2: seq_id contains a control character");
#undef E
    expect_error("step,seq_id,tok_idx,lp_rollout\n0,a,0,-1\n", "line 1: header has no 'lp_train' column");
    expect_error("step,seq_id,tok_idx,lp_rollout,lp_train,mask\n0,a,0,-1,-1,5\n", "line 2: mask must be 0 or 1");
    expect_error("step,seq_id,tok_idx,lp_rollout,lp_train,entropy\n0,a,0,-1,-1,-0.5\n", "entropy must be finite and >= 0");
    expect_error("step,seq_id,tok_idx,lp_rollout,lp_train,lp_train\n", "duplicate column 'lp_train'");
    expect_error("step,seq_id,tok_idx,lp_rollout,lp_train\n", "no tokens");
    expect_error("", "empty file");
    expect_error("\n\n  \n", "empty file");
    /* JSONL */
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1],\"step\":1}\n", "line 1: duplicate key \"step\"");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1],\"x\":1,\"x\":2}\n", "duplicate key \"x\"");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1]}\n", "missing \"lp_train\"");
    expect_error("{\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1]}\n", "missing \"step\"");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1,-2],\"lp_train\":[-1]}\n", "lp_train has 1 entries, lp_rollout 2");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[NaN]}\n", "lp_train[0] is NaN");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[null]}\n", "lp_train[0] is not a number");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[3]}\n", "lp_train[0] = 3 is positive");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1],\"mask\":[2]}\n", "mask[0] must be 0 or 1");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1]}\n{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1]}\n",
                 "line 2: duplicate sequence");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1]}\n{\"step\":1,\"seq_id\":\"a\",\"lp_rollout\":[-1]",
                 "line 2: truncated last line");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1]}}\n", "unexpected text after the JSON object");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1]\n", "object not closed");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1],\"n\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}\n",
                 "nested too deeply");
    expect_error("{\"schema\":\"other\"}\n", "unknown schema 'other'");
    expect_error("{\"step\":0,\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1],\"s\":\"a\x01\"}\n", "control character");
    expect_error("{\"step\":\"0\",\"seq_id\":\"a\",\"lp_rollout\":[-1],\"lp_train\":[-1]}\n", "step is not a non-negative integer");
}

static void test_long_line(void **state)
{
    (void)state;
    size_t n = (size_t)QS_RL_MAX_LINE + 100;
    char *b = malloc(n + 64);
    assert_non_null(b);
    const char *H = "step,seq_id,tok_idx,lp_rollout,lp_train\n";
    strcpy(b, H);
    memset(b + strlen(H), '1', n);
    b[strlen(H) + n] = '\n';
    coll *c = malloc(sizeof *c);
    qs_rl_parse_info info;
    qs_err e = {{0}};
    memset(c, 0, sizeof *c);
    qs_rl_sink s = {c, c_rows, c_seq};
    assert_int_equal(qs_rl_parse(b, strlen(H) + n + 1, &s, &info, &e), -1);
    assert_non_null(strstr(e.msg, "line 2: line longer than 32 MiB"));
    free(c);
    free(b);
}

static int64_t q_int(qs_db *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db->h, sql, -1, &st, NULL), SQLITE_OK);
    int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_import_transaction(void **state)
{
    (void)state;
    char dir[64];   /* under $TMPDIR, else the system's P_tmpdir; short: paths are built in 128 bytes */
    snprintf(dir, sizeof dir, "%s/qs_rl_XXXXXX", (getenv("TMPDIR") && strlen(getenv("TMPDIR")) <= 40) ? getenv("TMPDIR") : P_tmpdir);
    assert_non_null(mkdtemp(dir));
    char dbp[128], good[128], bad[128];
    snprintf(dbp, sizeof dbp, "%s/t.db", dir);
    snprintf(good, sizeof good, "%s/good.csv", dir);
    snprintf(bad, sizeof bad, "%s/bad.csv", dir);
    qs_err e = {{0}};
    qs_db *db = qs_db_open(dbp, &e);
    assert_non_null(db);
    /* enough rows for several batches of the writer thread before the error */
    size_t cap = 40u << 20, L = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    L += (size_t)snprintf(t + L, cap - L, "step,seq_id,group_id,tok_idx,lp_rollout,lp_train\n");
    for (int i = 0; i < 200000; i++)
        L += (size_t)snprintf(t + L, cap - L, "%d,s%d,g%d,%d,-0.%d,-0.%d\n", i / 10000, i / 50, i / 400, i % 50, i % 97 + 1, i % 89 + 1);
    write_file(good, t);
    snprintf(t + L, cap - L, "19,s3999,g499,50,-0.5,oops\n");
    write_file(bad, t);
    free(t);
    qs_rl_import_opts o = {0};
    qs_rl_import_result r;
    assert_int_equal(qs_rl_import(db, good, &o, &r, &e), 0);
    assert_string_equal(r.run, "good");
    assert_int_equal(r.info.tokens, 200000);
    assert_int_equal(q_int(db, "SELECT count(*) FROM rl_token"), 200000);
    assert_int_equal(q_int(db, "SELECT count(*) FROM rl_seq"), 4000);
    assert_int_equal(q_int(db, "SELECT count(DISTINCT grp) FROM rl_token"), 500);
    /* the bad file fails on its last line: nothing of it stays */
    o.run = "bad";
    assert_int_equal(qs_rl_import(db, bad, &o, &r, &e), -1);
    assert_non_null(strstr(e.msg, "bad.csv: line 200002: lp_train 'oops' is not a number"));
    assert_int_equal(q_int(db, "SELECT count(*) FROM rl_token"), 200000);
    assert_int_equal(q_int(db, "SELECT count(*) FROM rl_run"), 1);
    /* same name refused, then replaced */
    o.run = NULL;
    assert_int_equal(qs_rl_import(db, good, &o, &r, &e), -1);
    assert_non_null(strstr(e.msg, "exists already"));
    o.replace = 1;
    assert_int_equal(qs_rl_import(db, good, &o, &r, &e), 0);
    assert_int_equal(q_int(db, "SELECT count(*) FROM rl_token"), 200000);
    assert_int_equal(q_int(db, "SELECT count(*) FROM rl_run"), 1);
    int found;
    assert_int_equal(qs_rl_run_delete(db, "good", &found, &e), 0);
    assert_int_equal(found, 1);
    assert_int_equal(q_int(db, "SELECT count(*) FROM rl_token") + q_int(db, "SELECT count(*) FROM rl_seq"), 0);
    qs_db_close(db);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_double),
        cmocka_unit_test(test_csv_fields),
        cmocka_unit_test(test_jsonl_fields),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_import_transaction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
