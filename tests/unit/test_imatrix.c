/*
** Importance matrices (store/imatrix.h) against files llama.cpp's llama-imatrix wrote
** (tests/fixtures/imatrix/make_imatrix.sh: peer.gguf and peer.dat of one run): both read, the same
** importances from each (llama-quantize's normalisation), both written back byte for byte from the
** GGUF's sums; every truncation and a set of hostile edits refused in one line without a crash;
** rounding with importances (kernels/format_imatrix.h) independent of the thread count and, without
** importances, equal to the registry's rounding.
*/
#include "test_util.h"

#include <math.h>
#include <unistd.h>

#include "../../kernels/format_apply.h"
#include "../../kernels/format_imatrix.h"
#include "../../store/imatrix.h"

#define DIR "fixtures/imatrix/"

static void read_ok(const char *path, qs_imatrix *m)
{
    qs_err e = {{0}};
    char hash[33];
    if (qs_imatrix_read(path, m, hash, &e)) fail_msg("%s", e.msg);
    assert_int_equal(strlen(hash), 32);
}

/* 15 entries: 2 layers x 7 matrices and output.weight; 3 chunks of 32 tokens over text.txt */
static void test_peer_files(void **state)
{
    (void)state;
    qs_imatrix g, d;
    read_ok(DIR "peer.gguf", &g);
    read_ok(DIR "peer.dat", &d);
    assert_int_equal(g.legacy, 0);
    assert_int_equal(d.legacy, 1);
    assert_int_equal(g.n, 15);
    assert_int_equal(d.n, 15);
    assert_true(g.has_meta);
    assert_int_equal(g.chunk_count, 3);
    assert_int_equal(g.chunk_size, 32);
    assert_int_equal(d.chunk_count, 3);
    assert_int_equal(g.ndatasets, 1);
    assert_string_equal(g.datasets[0], "text.txt");
    assert_string_equal(d.datasets[0], "text.txt");
    assert_non_null(qs_imatrix_find(&g, "output.weight"));
    assert_null(qs_imatrix_find(&g, "token_embd.weight"));
    const qs_imat_entry *q = qs_imatrix_find(&g, "blk.1.ffn_down.weight");
    assert_non_null(q);
    assert_int_equal(q->ne0, 96);
    assert_int_equal(q->nmat, 1);
    assert_true(q->counts[0] == 96);
    assert_true(qs_imatrix_find(&d, "blk.1.ffn_down.weight")->counts[0] == 3);   /* ncall */
    /* the same importances from either file: sums / 96 and (sums / 96 * 3) / 3 */
    qs_err e = {{0}};
    for (int i = 0; i < g.n; i++) {
        assert_string_equal(g.e[i].name, d.e[i].name);
        float *wg, *wd;
        assert_int_equal(qs_imatrix_weights(&g, &g.e[i], &wg, &e), 0);
        assert_int_equal(qs_imatrix_weights(&d, &d.e[i], &wd, &e), 0);
        for (int64_t j = 0; j < g.e[i].ne0; j++) {
            assert_true(wg[j] > 0);
            assert_true(fabsf(wg[j] - wd[j]) <= 1e-6f * wg[j]);
        }
        free(wg);
        free(wd);
    }
    qs_imatrix_free(&g);
    qs_imatrix_free(&d);
}

static void same_bytes(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    uint8_t *x = tu_slurp(a, &la), *y = tu_slurp(b, &lb);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(la, lb);
    for (size_t i = 0; i < la; i++)
        if (x[i] != y[i]) fail_msg("%s and %s differ at byte %zu", a, b, i);
    free(x);
    free(y);
}

/* The writers given llama-imatrix's sums write llama-imatrix's files. */
static void test_writers_match_peer(void **state)
{
    (void)state;
    qs_imatrix g;
    qs_err e = {{0}};
    read_ok(DIR "peer.gguf", &g);
    char tg[256];
    tu_tmp_template(tg, sizeof tg, "qs_imatrix");
    int fd = mkstemp(tg);
    assert_true(fd >= 0);
    close(fd);
    if (qs_imatrix_write_gguf(tg, &g, &e)) fail_msg("%s", e.msg);
    same_bytes(tg, DIR "peer.gguf");
    if (qs_imatrix_write_dat(tg, &g, &e)) fail_msg("%s", e.msg);
    same_bytes(tg, DIR "peer.dat");
    /* a file read from a .dat holds no sums to write */
    qs_imatrix d;
    read_ok(DIR "peer.dat", &d);
    assert_int_equal(qs_imatrix_write_gguf(tg, &d, &e), -1);
    unlink(tg);
    qs_imatrix_free(&g);
    qs_imatrix_free(&d);
}

/* Parse an exact-size heap copy (ASan sees any overread): 0 or -1 with a one-line message. */
static int parse_copy(const uint8_t *b, size_t n, qs_err *e)
{
    uint8_t *c = malloc(n ? n : 1);
    memcpy(c, b, n);
    qs_imatrix m;
    e->msg[0] = 0;
    int rc = qs_imatrix_parse(c, n, &m, e);
    if (!rc) qs_imatrix_free(&m);
    else {
        assert_true(e->msg[0] != 0);
        assert_null(strchr(e->msg, '\n'));
    }
    free(c);
    return rc;
}

static void test_truncations(void **state)
{
    (void)state;
    const char *files[] = {DIR "peer.gguf", DIR "peer.dat"};
    for (int f = 0; f < 2; f++) {
        size_t len = 0;
        uint8_t *b = tu_slurp(files[f], &len);
        assert_non_null(b);
        qs_err e;
        size_t ok = 0;
        for (size_t n = 0; n < len; n++) ok += parse_copy(b, n, &e) == 0;
        /* the .dat's trailer is optional: cut in it, the entries still read; a GGUF only in its final padding */
        print_message("# %s: %zu of %zu truncations read\n", files[f], ok, len);
        assert_true(f == 0 ? ok <= 31 : ok > 0 && ok < 40);
        assert_int_equal(parse_copy(b, len, &e), 0);
        free(b);
    }
}

static void put32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

static void refused(const uint8_t *b, size_t n, const char *phrase)
{
    qs_err e;
    assert_int_equal(parse_copy(b, n, &e), -1);
    if (!strstr(e.msg, phrase)) fail_msg("'%s' lacks '%s'", e.msg, phrase);
}

static void test_hostile(void **state)
{
    (void)state;
    size_t len = 0, glen = 0;
    uint8_t *b = tu_slurp(DIR "peer.dat", &len), *g = tu_slurp(DIR "peer.gguf", &glen);
    assert_non_null(b);
    assert_non_null(g);
    uint8_t *c = malloc(len > glen ? len : glen);
    /* a header claiming 2^31 - 1 entries allocates nothing for them */
    memcpy(c, b, len); put32(c, 0x7fffffff); refused(c, len, "entry count");
    memcpy(c, b, len); put32(c, 0); refused(c, len, "entry count");
    /* the first entry: name length, then its nval past the end */
    int32_t nl;
    memcpy(&nl, b + 4, 4);
    memcpy(c, b, len); put32(c + 4, 1 << 30); refused(c, len, "name length");
    memcpy(c, b, len); put32(c + 8 + nl + 4, 0x7ffffff0); refused(c, len, "do not fit");
    memcpy(c, b, len); c[8] = 0; refused(c, len, "NUL");
    /* two entries of one name */
    memcpy(c, b, len); memcpy(c + 8, "blk.0.attn_q.weight", 19); refused(c, len, "appears twice");
    /* GGUF: a tensor count the file cannot hold, and a wrong version */
    memcpy(c, g, glen); memset(c + 8, 0xff, 7); refused(c, glen, "does not fit");
    memcpy(c, g, glen); put32(c + 4, 7); refused(c, glen, "version");
    /* the first tensor made F16, or renamed so that its counts have no sums */
    const uint8_t *at = memmem(g, glen, "blk.0.attn_k.weight.in_sum2", 27);
    assert_non_null(at);
    size_t o = (size_t)(at - g);
    memcpy(c, g, glen); c[o + 20] = 'X'; refused(c, glen, "mismatched sums and counts");
    memcpy(c, g, glen); put32(c + o + 27 + 4 + 8, 1); refused(c, glen, "must be F32");
    /* a count that is not a token count */
    free(c);
    free(b);
    free(g);
}

static void test_weights_rules(void **state)
{
    (void)state;
    float s[4] = {2, 4, 6, 8};
    double cnt[2] = {2, 0};
    qs_imat_entry en = {(char *)"w", 2, 2, s, cnt};
    qs_imatrix m = {0};
    m.n = 1;
    m.e = &en;
    float *w;
    qs_err e = {{0}};
    assert_int_equal(qs_imatrix_weights(&m, &en, &w, &e), 0);
    assert_true(w[0] == 1 && w[1] == 2 && w[2] == 1 && w[3] == 1);   /* count 0: ones, as llama-quantize */
    free(w);
    m.legacy = 1;
    cnt[0] = 0;   /* ncall <= 0: the values as stored */
    assert_int_equal(qs_imatrix_weights(&m, &en, &w, &e), 0);
    assert_true(w[0] == 2 && w[3] == 8);
    free(w);
    s[1] = INFINITY;
    assert_int_equal(qs_imatrix_weights(&m, &en, &w, &e), -1);
    assert_non_null(strstr(e.msg, "non-finite"));
}

static void test_fakeq_imatrix(void **state)
{
    (void)state;
    const size_t rows = 40, cols = 300;   /* one whole block of 256 and a partial one */
    float *x = malloc(rows * cols * sizeof *x), *a = malloc(rows * cols * sizeof *a), *b = malloc(rows * cols * sizeof *b);
    float qw[300];
    uint32_t s = 12345;
    for (size_t i = 0; i < rows * cols; i++) { s = s * 1664525u + 1013904223u; x[i] = ((int)(s >> 8) % 2001 - 1000) / 300.0f; }
    for (size_t j = 0; j < cols; j++) qw[j] = 0.1f + (float)(j % 17);
    qs_apply ap = {0};
    ap.f = qs_format_find("q4_k");
    ap.axis = 1;
    assert_non_null(ap.f);
    assert_true(qs_format_takes_imatrix(ap.f));
    assert_false(qs_format_takes_imatrix(qs_format_find("q8_0")));
    assert_false(qs_format_takes_imatrix(qs_format_find("mxfp4")));
    qs_err e = {{0}};
    memcpy(a, x, rows * cols * sizeof *x);
    memcpy(b, x, rows * cols * sizeof *x);
    assert_int_equal(qs_format_fakeq_imatrix(&ap, a, rows, cols, qw, 1, &e), 0);
    assert_int_equal(qs_format_fakeq_imatrix(&ap, b, rows, cols, qw, 4, &e), 0);
    assert_memory_equal(a, b, rows * cols * sizeof *a);
    int differ = 0;   /* importances change some blocks */
    memcpy(b, x, rows * cols * sizeof *x);
    assert_int_equal(qs_format_fakeq_imatrix(&ap, b, rows, cols, NULL, 2, &e), 0);
    for (size_t i = 0; i < rows * cols; i++) differ |= a[i] != b[i];
    assert_true(differ);
    /* without importances: the registry's rounding, tail block included */
    memcpy(a, x, rows * cols * sizeof *x);
    for (size_t r = 0; r < rows; r++)
        assert_int_equal(ap.f->fakeq(ap.f, &ap.o, a + r * cols, cols, a + r * cols, &e), 0);
    assert_memory_equal(a, b, rows * cols * sizeof *a);
    /* a format without importances is refused */
    ap.f = qs_format_find("q8_0");
    assert_int_equal(qs_format_fakeq_imatrix(&ap, a, rows, cols, qw, 1, &e), -1);
    free(x); free(a); free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peer_files),   cmocka_unit_test(test_writers_match_peer), cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_hostile),      cmocka_unit_test(test_weights_rules),      cmocka_unit_test(test_fakeq_imatrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
