/*
** The workbench's view table (app/tui/tui_view.c): every view has a row with its operations (a name,
** draw, key; search all or none), known flags and parent, a state of its own that is allocated,
** told of changes and freed; every view a key row names is in the table.
*/
#include "test_util.h"

#include "../../app/tui/tui_view.h"

#define TVF_ALL (TVF_TENSOR | TVF_BLOCK | TVF_METRICS | TVF_BROWSE | TVF_TEXT)

static void test_every_view_has_its_operations(void **state)
{
    (void)state;
    for (int v = 0; v < TV_COUNT; v++) {
        const tui_view_ops *V = tui_view_of((tui_view_id)v);
        if (!V || !V->name || !V->name[0] || !V->draw || !V->key) {
            print_error("view %d lacks a row, a name, draw or key\n", v);
            fail();
        }
        int search = (V->rows != NULL) + (V->row_text != NULL) + (V->cursor != NULL);
        if (search != 0 && search != 3) { print_error("%s: rows, row_text and cursor go together\n", V->name); fail(); }
        if (V->flags & ~(unsigned)TVF_ALL) { print_error("%s: unknown flags\n", V->name); fail(); }
        /* a parent (0: none, the first view) is one level deep: tui_jump puts only it under the view */
        if ((unsigned)V->parent >= TV_COUNT || (V->parent && ((int)V->parent == v || tui_view_of(V->parent)->parent))) {
            print_error("%s: bad parent\n", V->name);
            fail();
        }
        assert_string_equal(tui_view_name((tui_view_id)v), V->name);
        for (int u = 0; u < v; u++) assert_string_not_equal(tui_view_of((tui_view_id)u)->name, V->name);
    }
    assert_null(tui_view_of(TV_COUNT));
}

/* Every view a key row names, in its views, its hints or as the view it opens, has a row. */
static void test_keys_name_views_of_the_table(void **state)
{
    (void)state;
    size_t n;
    const tui_binding *k = tui_key_table(&n);
    unsigned all = (1u << TV_COUNT) - 1;
    for (size_t i = 0; i < n; i++) {
        if (k[i].views & ~all) { print_error("key row %zu (%s) names an unknown view\n", i, k[i].label); fail(); }
        for (int h = 0; h < TUI_HINTS && k[i].hint[h].text; h++)
            if (k[i].hint[h].views & ~all) { print_error("hint '%s' names an unknown view\n", k[i].hint[h].text); fail(); }
        if (k[i].act == TA_VIEW && !tui_view_of(k[i].to)) { print_error("key row %zu opens an unknown view\n", i); fail(); }
    }
}

static void test_states(void **state)
{
    (void)state;
    static tui T;
    memset(&T, 0, sizeof T);
    assert_int_equal(tui_views_init(&T), 0);
    for (int v = 0; v < TV_COUNT; v++) {
        assert_non_null(tui_state(&T, (tui_view_id)v));
        for (int u = 0; u < v; u++) assert_ptr_not_equal(tui_state(&T, (tui_view_id)u), tui_state(&T, (tui_view_id)v));
    }
    tui_views_changed(&T, TUI_CH_DB);
    tui_views_changed(&T, TUI_CH_FORMATS);
    tui_views_changed(&T, TUI_CH_OPTIONS);
    tui_views_free(&T);
    for (int v = 0; v < TV_COUNT; v++) assert_null(tui_state(&T, (tui_view_id)v));
}

/* The searches: the Output view's lines, the Kernels view's own rows (not the RL trajectories). */
static void test_search_rows(void **state)
{
    (void)state;
    static tui T;
    memset(&T, 0, sizeof T);
    assert_int_equal(tui_views_init(&T), 0);
    char out[] = "first\nsecond line\nthird";
    T.out = out;
    T.out_len = strlen(out);
    const tui_view_ops *O = tui_view_of(TV_OUTPUT);
    char buf[200];
    assert_int_equal(O->rows(&T), 3);
    assert_string_equal(O->row_text(&T, 1, buf, sizeof buf), "second line");
    assert_true(O->flags & TVF_TEXT);
    tui_kres K[3] = {{.kind = "trajectory", .format = "fp8", .what = "t"},
                     {.kind = "msd", .format = "mxfp4", .what = "passes"},
                     {.kind = "attn", .format = "fp8_e4m3", .what = "by length"}};
    T.kres = K;
    T.nkres = 3;
    const tui_view_ops *Kv = tui_view_of(TV_KERNELS);
    assert_int_equal(Kv->rows(&T), 2);
    assert_string_equal(Kv->row_text(&T, 0, buf, sizeof buf), "msd mxfp4 passes");
    assert_string_equal(Kv->row_text(&T, 1, buf, sizeof buf), "attn fp8_e4m3 by length");
    assert_ptr_equal(Kv->cursor(&T), tui_state(&T, TV_KERNELS));
    T.out = NULL;
    T.kres = NULL;
    tui_views_free(&T);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_view_has_its_operations),
        cmocka_unit_test(test_keys_name_views_of_the_table),
        cmocka_unit_test(test_states),
        cmocka_unit_test(test_search_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
