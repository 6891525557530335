/*
** Names cut in the middle (app/tui/tui_cut.c): exactly as wide as asked, the start and the end kept, two
** names stay different after the cut whenever one cut can show where they differ, and a list of
** them reads differently row by row once the differences can show.
*/
#include "test_util.h"

#include "../../app/tui/tui.h"

static void test_cut(void **state)
{
    (void)state;
    static const char *const names[] = {
        "mxfp4:scale-rule=rceil:block=16", "mxfp4:scale-rule=rceil:block=32", "mxfp4:scale-rule=floor:block=32",
        "sim/grpo/mxfp4/ais_r/seed1", "sim/grpo/mxfp4/ais_r/seed2", "sim/grpo/nvfp4/ais_r/seed1",
        "minilm-sample:encoder.layer.0.attention.self.query.weight", "minilm-sample:encoder.layer.1.attention.self.query.weight",
        "minilm-sample:encoder.layer.0.output.dense.weight", "short",
    };
    enum { N = sizeof names / sizeof *names };
    char out[N][200];
    for (int w = 12; w <= 60; w++) {
        for (int i = 0; i < N; i++) {
            tui_cut_middle(names[i], names, N, w, out[i], sizeof out[i]);
            size_t l = strlen(names[i]);
            if ((int)l <= w) { assert_string_equal(out[i], names[i]); continue; }
            assert_int_equal((int)strlen(out[i]), w);
            const char *t = strchr(out[i], '~');
            assert_non_null(t);
            assert_true(t > out[i]);                                      /* the start is kept */
            assert_memory_equal(out[i], names[i], (size_t)(t - out[i]));
            assert_string_equal(t + 1, names[i] + l - strlen(t + 1));     /* and the end */
        }
        /* on a list: from 32 columns on (where layer.0 and layer.1 can show), every row reads differently */
        for (int i = 0; i < N && w >= 32; i++)
            for (int j = i + 1; j < N; j++)
                if (!strcmp(out[i], out[j])) fail_msg("width %d: %s and %s both read %s", w, names[i], names[j], out[i]);
        /* two names: distinct whenever one cut can show where they differ (within w - 2 of either end) */
        for (int i = 0; i < N; i++)
            for (int j = i + 1; j < N; j++) {
                size_t li = strlen(names[i]), lj = strlen(names[j]), fa = 0, fb = 0;
                while (names[i][fa] && names[i][fa] == names[j][fa]) fa++;
                while (fb < li && fb < lj && names[i][li - 1 - fb] == names[j][lj - 1 - fb]) fb++;
                if (fa + 2 >= (size_t)w && fb + 2 >= (size_t)w) continue;
                const char *two[2] = {names[i], names[j]};
                char a[200], b[200];
                tui_cut_middle(names[i], two, 2, w, a, sizeof a);
                tui_cut_middle(names[j], two, 2, w, b, sizeof b);
                if (!strcmp(a, b)) fail_msg("width %d: %s and %s both read %s", w, names[i], names[j], a);
            }
    }
    /* the example of the workbench: the sequence-level differences stay visible */
    char o[64];
    tui_cut_middle("sim/grpo/mxfp4/ais_r/seed2", names, N, 20, o, sizeof o);
    assert_int_equal(strlen(o), 20);
    assert_true(!strncmp(o, "sim/", 4) && strchr(o, '~') && !strcmp(o + 15, "seed2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
