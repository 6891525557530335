/*
** The workbench's key table (app/tui_keys.c): one binding per key per view, every action bound
** and documented in the generated help, view-specific bindings before the global ones.
*/
#include "test_util.h"

#include <curses.h>

#include "../../app/tui.h"

/* No key is bound twice among the global rows, nor twice among the rows of one view. */
static void test_no_duplicate_keys(void **state)
{
    (void)state;
    size_t nkeys;
    const tui_binding *keys = tui_key_table(&nkeys);
    for (size_t i = 0; i < nkeys; i++)
        for (size_t j = i + 1; j < nkeys; j++) {
            int same_scope = keys[i].views == 0 ? keys[j].views == 0 : (keys[i].views & keys[j].views) != 0;
            if (!same_scope) continue;
            for (int a = 0; a < 5 && keys[i].keys[a]; a++)
                if (tui_binding_has(&keys[j], keys[i].keys[a])) {
                    print_error("key %d bound by rows %zu (%s) and %zu (%s)\n", keys[i].keys[a], i, keys[i].help, j,
                                keys[j].help);
                    fail();
                }
        }
}

/* Every action has a binding and a help text that appears in the generated help. */
static void test_every_action_bound_and_documented(void **state)
{
    (void)state;
    size_t nkeys;
    const tui_binding *keys = tui_key_table(&nkeys);
    char **L = NULL;
    int n = tui_help_lines(&L);
    assert_true(n > (int)nkeys / 2);
    for (int a = TA_UP; a < TA_COUNT; a++) {
        int found = 0;
        for (size_t i = 0; i < nkeys; i++) {
            if ((int)keys[i].act != a) continue;
            found = 1;
            assert_non_null(keys[i].help);
            assert_true(strlen(keys[i].label) > 0);
        }
        if (!found) { print_error("action %d has no key\n", a); fail(); }
    }
    /* each distinct help text is in the help screen */
    for (size_t i = 0; i < nkeys; i++) {
        int in = 0;
        for (int k = 0; k < n && !in; k++) in = strstr(L[k], keys[i].help) != NULL;
        if (!in) {
            print_error("help misses '%s'\n", keys[i].help);
            fail();
        }
    }
    for (int k = 0; k < n; k++) free(L[k]);
    free(L);
}

static void test_dispatch(void **state)
{
    (void)state;
    assert_int_equal(tui_key_action(TV_TENSORS, 'j'), TA_DOWN);
    assert_int_equal(tui_key_action(TV_TENSORS, KEY_DOWN), TA_DOWN);
    assert_int_equal(tui_key_action(TV_TENSORS, 'Q'), TA_QUIT);
    assert_int_equal(tui_key_action(TV_TENSORS, KEY_LEFT), TA_BACK);     /* global meaning */
    assert_int_equal(tui_key_action(TV_BLOCKS, KEY_LEFT), TA_LEFT);      /* the grid's own */
    assert_int_equal(tui_key_action(TV_BLOCKS, KEY_RIGHT), TA_RIGHT);
    assert_int_equal(tui_key_action(TV_FORMATS, KEY_RIGHT), TA_ENTER);
    assert_int_equal(tui_key_action(TV_INSPECT, 'b'), TA_SECOND);
    assert_int_equal(tui_key_action(TV_TENSORS, 'b'), TA_NONE);          /* b only means something in blocks */
    assert_int_equal(tui_key_action(TV_HIST, 'v'), TA_HIST_KIND);
    assert_int_equal(tui_key_action(TV_TENSORS, 'v'), TA_NONE);
    assert_int_equal(tui_key_action(TV_RL, 'm'), TA_METRIC);
    assert_int_equal(tui_key_action(TV_TENSORS, 'x'), TA_NONE);
    for (int v = 0; v < TV_COUNT; v++) assert_non_null(tui_hint_bar((tui_view_id)v));
}

/* The hint bar fits any width by a rule: whole entries go, from the end, "? help" kept and the ways
** out last; no word is ever cut ("f forma  o optio" read as nonsense); never wider than asked. */
static int whole_entries(const char *out, const char *bar)
{
    char buf[300];
    snprintf(buf, sizeof buf, "%s", out);
    for (char *e = buf; *e;) {
        char *end = strstr(e, "  ");
        if (end) *end = 0;
        /* an entry of the bar: preceded by the start or two spaces, followed by two spaces or the end */
        int found = 0;
        size_t l = strlen(e);
        for (const char *q = bar; (q = strstr(q, e)) != NULL; q++)
            if ((q == bar || (q >= bar + 2 && q[-1] == ' ' && q[-2] == ' ')) && (q[l] == 0 || !strncmp(q + l, "  ", 2))) found = 1;
        if (!found) return 0;
        if (!end) break;
        e = end + 2;
    }
    return 1;
}

static void test_hints_fit(void **state)
{
    (void)state;
    char out[300];
    const char *bar = "Enter blocks  Tab histogram  s/S sort  f formats  o options  r recompute  h back  ? help";
    tui_fit_hints(bar, 200, out, sizeof out);
    assert_string_equal(out, bar);
    tui_fit_hints(bar, 79, out, sizeof out);
    assert_string_equal(out, "Enter blocks  Tab histogram  s/S sort  f formats  o options  h back  ? help");
    tui_fit_hints(bar, 44, out, sizeof out);
    assert_string_equal(out, "Enter blocks  Tab histogram  h back  ? help");
    tui_fit_hints(bar, 42, out, sizeof out);
    assert_string_equal(out, "Enter blocks  h back  ? help");
    tui_fit_hints(bar, 12, out, sizeof out);
    assert_string_equal(out, "? help");
    tui_fit_hints("j/k scroll  q close", 12, out, sizeof out);
    assert_string_equal(out, "q close");
    for (int v = 0; v < TV_COUNT; v++)
        for (int w = 20; w <= 120; w++) {
            const char *b = tui_hint_bar((tui_view_id)v);
            tui_fit_hints(b, w, out, sizeof out);
            assert_true((int)strlen(out) <= w);
            assert_true(whole_entries(out, b));
            if (strstr(b, "? help")) assert_non_null(strstr(out, "? help"));
        }
}

static size_t nonspace(char **L, int n)
{
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (const char *p = L[i]; *p; p++) k += *p != ' ';
    return k;
}

/* The help wraps to the screen: no line wider than asked, no word lost, unchanged when it fits. */
static void test_help_wraps(void **state)
{
    (void)state;
    char **A, **B;
    int na = tui_help_lines(&A);
    size_t all = nonspace(A, na), longest = 0;
    for (int i = 0; i < na; i++) if (strlen(A[i]) > longest) longest = strlen(A[i]);
    for (int w = 40; w <= 140; w += 7) {
        int nb = tui_help_lines_w(w, &B);
        assert_true(nb >= na || (size_t)w < longest);
        for (int i = 0; i < nb; i++) assert_true((int)strlen(B[i]) <= w);   /* the help text is ASCII */
        assert_int_equal(nonspace(B, nb), all);
        if ((size_t)w >= longest) {
            assert_int_equal(nb, na);
            for (int i = 0; i < nb; i++) assert_string_equal(A[i], B[i]);
        }
        for (int i = 0; i < nb; i++) free(B[i]);
        free(B);
    }
    for (int i = 0; i < na; i++) free(A[i]);
    free(A);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_duplicate_keys),
        cmocka_unit_test(test_every_action_bound_and_documented),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_hints_fit),
        cmocka_unit_test(test_help_wraps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
