/*
** The spec of `rl grpo --sweep` (analysis/grpo_llm_sweep.c): the presets' runs, a spec's product in
** seed-major order with '|' between rollouts (whose specs hold commas), defaults for missing keys, the
** name (preset, or sweep- and a hash stable for the same text), and refusals naming the fault.
*/
#include "test_util.h"

#include "../../analysis/grpo_llm_sweep.h"

static qs_rl_sweep S;

static void test_presets(void **st)
{
    (void)st;
    qs_err e = {{0}};
    assert_int_equal(qs_rl_sweep_parse("hif4-rl", &S, &e), 0);
    assert_string_equal(S.name, "hif4-rl");
    assert_int_equal(S.n, 21);
    assert_string_equal(S.run[0].rollout, "");
    assert_string_equal(S.run[0].trainer, "bf16");
    assert_string_equal(S.run[1].trainer, "hif4");
    assert_string_equal(S.run[2].rollout, "w=hif4,a=hif4");
    assert_string_equal(S.run[2].trainer, "fp32");
    assert_string_equal(S.run[6].rollout, "w=mxfp4,a=mxfp4");
    assert_string_equal(S.run[6].trainer, "bf16");
    assert_int_equal(S.run[20].seed, 3);
    assert_int_equal(qs_rl_sweep_parse("ais", &S, &e), 0);
    assert_int_equal(S.n, 18);
    assert_string_equal(S.run[5].correction, "ais_r");
    assert_int_equal(qs_rl_sweep_parse("resq", &S, &e), 0);
    assert_int_equal(S.n, 21);
    assert_string_equal(S.run[3].rollout, "w=hif4,a=hif4,resq=2:4");
    assert_int_equal(qs_rl_sweep_parse("hif4-rl;seeds=3,9", &S, &e), 0);   /* a piece: the preset's seed 3 */
    assert_string_equal(S.name, "hif4-rl");
    assert_int_equal(S.n, 7);
    assert_int_equal(S.run[0].seed, 3);
    assert_string_equal(S.run[6].rollout, "w=mxfp4,a=mxfp4");
    assert_int_equal(qs_rl_sweep_parse("ais;trainers=bf16", &S, &e), -1);
    assert_non_null(strstr(e.msg, "only ;seeds=LIST"));
}

static void test_spec(void **st)
{
    (void)st;
    qs_err e = {{0}};
    assert_int_equal(qs_rl_sweep_parse("corrections=none|tis;rollouts=default|w=mxfp4,a=mxfp4,kv=fp8_e4m3;seeds=7,8", &S, &e), 0);
    assert_int_equal(S.n, 8);
    assert_string_equal(S.run[0].rollout, "");
    assert_string_equal(S.run[0].trainer, "fp32");
    assert_string_equal(S.run[1].correction, "tis");
    assert_string_equal(S.run[2].rollout, "w=mxfp4,a=mxfp4,kv=fp8_e4m3");
    assert_int_equal(S.run[3].seed, 7);
    assert_int_equal(S.run[4].seed, 8);
    assert_memory_equal(S.name, "sweep-", 6);
    assert_int_equal(strlen(S.name), 14);
    char n1[32];
    strcpy(n1, S.name);
    assert_int_equal(qs_rl_sweep_parse("trainers=bf16", &S, &e), 0);
    assert_int_equal(S.n, 3);   /* default seeds 1, 2, 3 */
    assert_string_not_equal(S.name, n1);
    assert_int_equal(qs_rl_sweep_parse("corrections=none|tis;rollouts=default|w=mxfp4,a=mxfp4,kv=fp8_e4m3;seeds=7,8", &S, &e), 0);
    assert_string_equal(S.name, n1);
}

static void test_refused(void **st)
{
    (void)st;
    static const struct { const char *spec, *msg; } bad[] = {
        {"nope", "unknown preset 'nope'"},         {"seeds=1;seeds=2", "seeds given twice"},
        {"colors=1", "unknown key 'colors'"},      {"seeds=1,,2", "an empty item in seeds"},
        {"seeds=x", "seed 'x' is not a number"},   {"trainers=fp32,fp32", "'fp32' twice in trainers"},
        {"seeds=1;x", "'x' is not KEY=LIST"},      {"seeds=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "more than 16 items"},
        {"seeds=-1", "not a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qs_err e = {{0}};
        assert_int_equal(qs_rl_sweep_parse(bad[i].spec, &S, &e), -1);
        assert_non_null(strstr(e.msg, bad[i].msg));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
