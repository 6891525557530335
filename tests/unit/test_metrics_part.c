/*
** Partial analyses (metrics.h: qs_analyze_part, qs_an_part_*): a tensor's bands cut 1, 2 or 3 ways,
** each part run on its own thread count, through bytes and back, merged in band order and finished,
** give the bytes of the whole analysis; misuse is refused.
*/
#include "test_util.h"

#include "metrics_test_util.h"

/* The result's bytes: the stored JSON texts and every array. */
static void same_result(const qs_analysis *a, const qs_analysis *b, const char *what)
{
    char *ja = qs_metrics_json(&a->m), *jb = qs_metrics_json(&b->m);
    char *ha = qs_hists_json(a), *hb = qs_hists_json(b);
    if (strcmp(ja, jb) || strcmp(ha, hb)) fail_msg("%s: the stored texts differ\n%s\n%s", what, ja, jb);
    free(ja); free(jb); free(ha); free(hb);
    same_analysis(a, b);
    assert_true(!a->block_rmse == !b->block_rmse && !a->block_scale_code == !b->block_scale_code);
    assert_true(!a->row_rmse == !b->row_rmse);
}

/* with a NaN and a value beyond every format's range */
static float *make_part_tensor(uint64_t rows, uint64_t cols, uint64_t seed)
{
    float *x = make_tensor(rows, cols, seed);
    x[rows * cols / 3] = NAN;
    x[rows * cols / 2] = 3e36f;
    return x;
}

/* Bands [cut[i], cut[i + 1]) on threads 1, 3, 2, ..., each through bytes, merged and finished. */
static void run_cut(const qs_apply *a, uint64_t rows, uint64_t cols, const float *x, const uint64_t *cut, int nparts,
                    qs_analysis *out)
{
    src s = {x, rows * cols, UINT64_MAX, 0};
    qs_an_part *acc = NULL;
    for (int i = 0; i < nparts; i++) {
        qs_analyze_opts o;
        memset(&o, 0, sizeof o);
        o.threads = 1 + (2 * i) % 3;
        o.blocks = 1;
        qs_err e = {{0}};
        qs_an_part *p, *q;
        uint8_t *b;
        size_t len;
        if (qs_analyze_part(a, rows, cols, rd_mem, &s, 1, &o, cut[i], cut[i + 1], &p, &e)) fail_msg("part: %s", e.msg);
        assert_int_equal(qs_an_part_save(p, &b, &len, &e), 0);
        qs_an_part_free(p);
        assert_int_equal(qs_an_part_load(b, len, &q, &e), 0);
        free(b);
        if (!acc) acc = q;
        else {
            if (qs_an_part_merge(acc, q, &e)) fail_msg("merge: %s", e.msg);
            qs_an_part_free(q);
        }
    }
    qs_err e = {{0}};
    if (qs_an_part_finish(acc, out, &e)) fail_msg("finish: %s", e.msg);
    qs_an_part_free(acc);
}

static void test_any_cut_is_the_whole(void **st)
{
    (void)st;
    struct { const char *f; uint64_t rows, cols; int axis; qs_gran g; } c[] = {
        {"mxfp4", 700, 1000, 1, QS_GRAN_BLOCK},       /* row runs */
        {"mxfp4", 704, 1000, 0, QS_GRAN_BLOCK},       /* column runs */
        {"nvfp4", 700, 1000, 1, QS_GRAN_BLOCK},
        {"nvfp4", 704, 1000, 0, QS_GRAN_BLOCK},
        {"nvfp4", 3, 300000, 1, QS_GRAN_BLOCK},       /* pieces of rows */
        {"hif4", 600, 1024, 1, QS_GRAN_BLOCK},
        {"hif4", 640, 1024, 0, QS_GRAN_BLOCK},
        {"fp8_e4m3", 700, 1000, 1, QS_GRAN_BLOCK},    /* a plain cast */
        {"fp8_e4m3", 700, 1000, 0, QS_GRAN_BLOCK},
        {"int8", 300, 1000, 1, QS_GRAN_COL},          /* in memory, a scale per column */
        {"mxfp4", 20, 1000, 0, QS_GRAN_BLOCK},        /* one band of fewer rows than a band takes */
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        float *x = make_part_tensor(c[k].rows, c[k].cols, 900 + k);
        qs_apply a;
        memset(&a, 0, sizeof a);
        a.f = qs_format_find(c[k].f);
        assert_non_null(a.f);
        a.axis = c[k].axis;
        a.gran = c[k].g;
        qs_err e = {{0}};
        uint64_t nb;
        assert_int_equal(qs_analyze_nbands(&a, c[k].rows, c[k].cols, &nb, &e), 0);
        src s = {x, c[k].rows * c[k].cols, UINT64_MAX, 0};
        qs_analyze_opts o;
        memset(&o, 0, sizeof o);
        o.threads = 2;
        o.blocks = 1;
        qs_analysis whole;
        if (qs_analyze(&a, c[k].rows, c[k].cols, rd_mem, &s, 1, &o, &whole, &e)) fail_msg("%s: %s", c[k].f, e.msg);
        uint64_t cuts[][4] = {{0, nb}, {0, 0, nb},   /* an empty range first */
                              {0, nb / 2, nb}, {0, 1, nb}, {0, nb / 3, 2 * nb / 3, nb}, {0, nb - 2, nb - 1, nb}};
        int nparts[] = {1, 2, 2, 2, 3, 3};
        for (int t = 0; t < (nb >= 3 ? 6 : 2); t++) {
            qs_analysis an;
            if (t == 5) qs_simd_force(QS_SIMD_SCALAR);   /* the portable path too */
            run_cut(&a, c[k].rows, c[k].cols, x, cuts[t], nparts[t], &an);
            qs_simd_force(-1);
            char what[64];
            snprintf(what, sizeof what, "%s axis %d, cut %d", c[k].f, c[k].axis, t);
            same_result(&whole, &an, what);
            qs_analysis_free(&an);
        }
        qs_analysis_free(&whole);
        free(x);
    }
}

static void test_misuse(void **st)
{
    (void)st;
    const uint64_t R = 700, C = 1000;
    float *x = make_part_tensor(R, C, 7);
    src s = {x, R * C, UINT64_MAX, 0};
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = qs_format_find("mxfp4");
    a.axis = 1;
    a.gran = QS_GRAN_BLOCK;
    qs_err e = {{0}};
    uint64_t nb;
    assert_int_equal(qs_analyze_nbands(&a, R, C, &nb, &e), 0);
    qs_an_part *p0, *p1, *p2;
    assert_int_equal(qs_analyze_part(&a, R, C, rd_mem, &s, 1, NULL, 0, 2, &p0, &e), 0);
    assert_int_equal(qs_analyze_part(&a, R, C, rd_mem, &s, 1, NULL, 2, 3, &p1, &e), 0);
    assert_int_equal(qs_analyze_part(&a, R, C, rd_mem, &s, 1, NULL, 3, nb, &p2, &e), 0);
    assert_int_equal(qs_analyze_part(&a, R, C, rd_mem, &s, 1, NULL, 2, nb + 1, &(qs_an_part *){NULL}, &e), -1);
    qs_analysis an;
    assert_int_equal(qs_an_part_finish(p0, &an, &e), -1);            /* bands missing */
    assert_non_null(strstr(e.msg, "every band"));
    assert_int_equal(qs_an_part_merge(p0, p2, &e), -1);              /* a gap */
    assert_int_equal(qs_an_part_merge(p0, p1, &e), 0);
    assert_int_equal(qs_an_part_merge(p0, p2, &e), 0);
    assert_int_equal(qs_an_part_finish(p0, &an, &e), 0);
    qs_analysis_free(&an);
    /* another format's partial does not merge */
    qs_apply b = a;
    b.f = qs_format_find("nvfp4");
    qs_an_part *q;
    assert_int_equal(qs_analyze_part(&b, R, C, rd_mem, &s, 1, NULL, 2, 3, &q, &e), 0);
    qs_an_part *p3;
    assert_int_equal(qs_analyze_part(&a, R, C, rd_mem, &s, 1, NULL, 0, 2, &p3, &e), 0);
    assert_int_equal(qs_an_part_merge(p3, q, &e), -1);
    /* bytes: cut short anywhere, or with a foreign head, are refused */
    uint8_t *bytes;
    size_t len;
    assert_int_equal(qs_an_part_save(p1, &bytes, &len, &e), 0);
    for (size_t cut = 0; cut < len; cut += 1 + len / 97) {
        qs_an_part *r = NULL;
        assert_int_equal(qs_an_part_load(bytes, cut, &r, &e), -1);
        assert_null(r);
    }
    bytes[0] ^= 1;
    assert_int_equal(qs_an_part_load(bytes, len, &(qs_an_part *){NULL}, &e), -1);
    free(bytes);
    qs_an_part_free(p0); qs_an_part_free(p1); qs_an_part_free(p2); qs_an_part_free(p3); qs_an_part_free(q);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_any_cut_is_the_whole),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
