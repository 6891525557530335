/*
** What an MPI rank sends rank 0: a computed analysis (analyze_service.h: qs_an_result_pack/unpack)
** and a claim's figure (plot_pack.h) come back byte for byte; every truncation of the bytes, and
** a corrupted count, is refused without a crash or a leak.
*/
#include "test_util.h"

#include <math.h>

#include "../../analysis/analyze_service.h"
#include "../../analysis/plot_pack.h"

static void make_result(qs_an_result *r)
{
    memset(r, 0, sizeof *r);
    r->metrics = strdup("{\"mse\":0.25,\"n\":1024}");
    r->hist = strdup("{\"value\":{\"counts\":[1,2,3]}}");
    r->blocks = strdup("{\"nblocks\":4}");
    static const char *const names[] = {"scale_code", "absmax", "row_rmse"};
    static const size_t sizes[] = {4, 16, 0};
    for (int i = 0; i < 3; i++) {
        r->blob[i].name = names[i];
        r->blob[i].nbytes = sizes[i];
        r->blob[i].data = malloc(sizes[i] ? sizes[i] : 1);
        for (size_t k = 0; k < sizes[i]; k++) ((uint8_t *)r->blob[i].data)[k] = (uint8_t)(17 * k + i);
    }
    r->nblobs = 3;
}

static void result_round_trip(void **state)
{
    (void)state;
    qs_an_result r, back;
    make_result(&r);
    uint8_t *b = NULL;
    size_t n = 0;
    qs_err e = {{0}};
    assert_int_equal(qs_an_result_pack(&r, &b, &n, &e), 0);
    assert_int_equal(qs_an_result_unpack(b, n, &back, &e), 0);
    assert_string_equal(back.metrics, r.metrics);
    assert_string_equal(back.hist, r.hist);
    assert_string_equal(back.blocks, r.blocks);
    assert_int_equal(back.nblobs, 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(back.blob[i].name, r.blob[i].name);
        assert_int_equal(back.blob[i].nbytes, r.blob[i].nbytes);
        assert_memory_equal(back.blob[i].data, r.blob[i].data, r.blob[i].nbytes);
    }
    qs_an_result_free(&back);
    /* a result without per-block arrays keeps blocks absent */
    free(r.blocks);
    r.blocks = NULL;
    free(b);
    assert_int_equal(qs_an_result_pack(&r, &b, &n, &e), 0);
    assert_int_equal(qs_an_result_unpack(b, n, &back, &e), 0);
    assert_null(back.blocks);
    qs_an_result_free(&back);
    /* every shorter prefix, and a byte too many, is refused */
    for (size_t k = 0; k < n; k++) assert_int_equal(qs_an_result_unpack(b, k, &back, &e), -1);
    uint8_t *longer = malloc(n + 1);
    memcpy(longer, b, n);
    longer[n] = 0;
    assert_int_equal(qs_an_result_unpack(longer, n + 1, &back, &e), -1);
    assert_non_null(strstr(e.msg, "malformed"));
    free(longer);
    free(b);
    qs_an_result_free(&r);
}

static qs_figure *make_figure(void)
{
    qs_figure *f = qs_fig_new("a claim");
    double x[4] = {1, 2, 3, 4}, y[4] = {0.5, NAN, -2, 1e300}, edges[4] = {0, 1, 2, 3}, counts[3] = {5, 0, 7};
    qs_fig_add(f, QS_SER_LINE, "measured", x, y, 4);
    qs_fig_add(f, QS_SER_STEP, NULL, edges, counts, 3);
    qs_fig_annotate(f, 0.5, 0.5, 1, "paper: %d", 38);
    double v[6] = {1, 2, 3, 4, 5, NAN};
    qs_fig_heatmap(f, v, 2, 3);
    snprintf(f->note, sizeof f->note, "2 values <= 0 not shown");
    return f;
}

static void figure_round_trip(void **state)
{
    (void)state;
    qs_figure *f = make_figure();
    uint8_t *b = NULL;
    size_t n = 0, cap = 0, at = 0;
    assert_int_equal(qs_fig_pack(f, &b, &n, &cap), 0);
    assert_int_equal(qs_fig_pack(NULL, &b, &n, &cap), 0);   /* a claim without a plot */
    qs_figure *g = NULL, *none = (qs_figure *)1;
    assert_int_equal(qs_fig_unpack(b, n, &at, &g), 0);
    assert_int_equal(qs_fig_unpack(b, n, &at, &none), 0);
    assert_null(none);
    assert_int_equal(at, n);
    assert_string_equal(g->title, f->title);
    assert_string_equal(g->note, f->note);
    assert_int_equal(g->nseries, 2);
    assert_string_equal(g->series[0].name, "measured");
    assert_null(g->series[1].name);
    assert_memory_equal(g->series[0].y, f->series[0].y, 4 * sizeof(double));   /* NaN bits too */
    assert_memory_equal(g->series[1].x, f->series[1].x, 4 * sizeof(double));   /* STEP: n + 1 edges */
    assert_int_equal(g->nannots, 1);
    assert_string_equal(g->annots[0].text, "paper: 38");
    assert_non_null(g->heat);
    assert_memory_equal(g->heat->v, f->heat->v, 6 * sizeof(double));
    qs_fig_free(g);
    /* truncated anywhere: refused, nothing leaked (the sanitizer build checks) */
    for (size_t k = 0; k + 1 < n; k++) {
        at = 0;
        qs_figure *h = NULL;
        int rc = qs_fig_unpack(b, k, &at, &h);
        if (rc == 0) { assert_true(at <= k); qs_fig_free(h); }
        else assert_null(h);
    }
    /* a series count far beyond the bytes is refused, not allocated */
    qs_figure big = *f;
    big.nseries = (size_t)1 << 60;
    memcpy(b + 1, &big, sizeof big);
    at = 0;
    assert_int_equal(qs_fig_unpack(b, n, &at, &g), -1);
    free(b);
    qs_fig_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(result_round_trip),
        cmocka_unit_test(figure_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
