/*
** The workbench's key table (app/tui/tui_keys.c): one binding per key per view, every action bound
** and documented in the generated help, view-specific bindings before the global ones; every
** row names known views, every hint is true (its key does its row's action in its views), and the
** hint bar of every golden screen is the one the table gives its view.
*/
#include <dirent.h>

#include "test_util.h"

#include <curses.h>

#include "../../app/tui/tui_view.h"

#define V(x) (1u << (x))
#define ALLV ((1u << TV_COUNT) - 1)

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

/* Rows and hints name only views that exist; a hint only views its row applies to, and there its
** key does the row's action (no other row takes the key first); TA_VIEW rows open a view. */
static void test_rows_name_known_views(void **state)
{
    (void)state;
    size_t nkeys;
    const tui_binding *keys = tui_key_table(&nkeys);
    for (size_t i = 0; i < nkeys; i++) {
        const tui_binding *b = &keys[i];
        if (b->views & ~ALLV) { print_error("row %zu (%s) names an unknown view\n", i, b->label); fail(); }
        if (b->act == TA_VIEW) {
            assert_true((unsigned)b->to < TV_COUNT);
            assert_non_null(b->tab[0]);
            assert_non_null(b->tab[1]);
        } else assert_null(b->tab[0]);
        for (int h = 0; h < TUI_HINTS && b->hint[h].text; h++) {
            unsigned hv = b->hint[h].views;
            if (!hv || hv & ~ALLV || (b->views && hv & ~b->views)) {
                print_error("hint '%s' of row %zu names a view its row does not apply to\n", b->hint[h].text, i);
                fail();
            }
            for (int v = 0; v < TV_COUNT; v++)
                if (hv & V(v) && tui_key_action((tui_view_id)v, b->keys[0]) != b->act) {
                    print_error("hint '%s': its key does something else in view %d\n", b->hint[h].text, v);
                    fail();
                }
        }
    }
    /* every view that can be opened by a key is named in the strip once */
    char strip[200];
    tui_view_strip(0, strip, sizeof strip);
    assert_string_equal(strip, "1 Tensors 2 Formats 3 Hist 4 Blocks 5 RL 6 Kernels 7 Output 8 Model 9 Training ");
    tui_view_strip(1, strip, sizeof strip);
    assert_string_equal(strip, "1 Tens 2 Fmt 3 Hist 4 Blk 5 RL 6 Kern 7 Out 8 Model 9 Train ");
    for (int v = 0; v < TV_COUNT; v++) assert_true(strlen(tui_hint_bar((tui_view_id)v)) > 0);
}

/* Every golden screen of tests/e2e/tui.sh ends in the hint bar the table gives the view its status
** line names, fitted to the screen's width (COLS=100 unless the name says WxH). */
static void test_golden_hint_bars(void **state)
{
    (void)state;
    const char *dir = "e2e/golden/tui";
    DIR *d = opendir(dir);
    assert_non_null(d);
    int checked = 0, seen[TV_COUNT] = {0};
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name);
        if (nl < 5 || strcmp(de->d_name + nl - 4, ".txt")) continue;
        char path[512], line[1024], prev[1024] = "", last[1024] = "";
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            snprintf(prev, sizeof prev, "%s", last);
            snprintf(last, sizeof last, "%s", line);
        }
        fclose(f);
        int w = 100, h = 0;
        const char *x = strrchr(de->d_name, '-');
        if (x && sscanf(x, "-%dx%d.txt", &w, &h) != 2) w = 100;
        int v = -1;
        for (int k = 0; k < TV_COUNT; k++) {   /* the status line names the view as its table row does */
            const char *name = tui_view_of((tui_view_id)k)->name;
            size_t l = strlen(name);
            if (prev[0] == ' ' && !strncmp(prev + 1, name, l) && prev[1 + l] == ' ') v = k;
        }
        if (v < 0) {   /* only the too-small message has no status line */
            assert_non_null(strstr(de->d_name, "too-small"));
            continue;
        }
        char want[300];
        tui_fit_hints(tui_hint_bar((tui_view_id)v), w - 1, want, sizeof want);
        if (strcmp(last, want)) {
            print_error("%s: the bar is '%s', the table gives %s '%s'\n", de->d_name, last,
                        tui_view_of((tui_view_id)v)->name, want);
            fail();
        }
        seen[v] = 1;
        checked++;
    }
    closedir(d);
    assert_true(checked > 40);
    for (int v = 0; v < TV_COUNT; v++)
        if (!seen[v]) { print_error("no golden screen of the %s view\n", tui_view_of((tui_view_id)v)->name); fail(); }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_duplicate_keys),
        cmocka_unit_test(test_every_action_bound_and_documented),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_hints_fit),
        cmocka_unit_test(test_help_wraps),
        cmocka_unit_test(test_rows_name_known_views),
        cmocka_unit_test(test_golden_hint_bars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
