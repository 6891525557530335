/*
** grpo_state.json of `rl grpo` checkpoints (store/grpo_state.c): every field round-trips bit for bit
** (a lambda that needs 17 digits, call counters beyond 2^63, the options list, null model and run);
** damaged files are refused naming the file and the field.
*/
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../store/grpo_state.h"
#include "../../store/train_ckpt.h"

static char g_dir[512], g_path[700];

static int setup(void **st)
{
    (void)st;
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/qs_gst_XXXXXX", t && *t ? t : P_tmpdir);
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/%s", g_dir, QS_GRPO_STATE_FILE);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    remove(g_path);
    return rmdir(g_dir);
}

static qs_grpo_ckpt_state sample(void)
{
    static char a0[] = "--trainer=nvfp4", a1[] = "--lr=0.001", init[] = "/x/m0", run[] = "rl/grpo/arith/s2";
    qs_grpo_ckpt_state s;
    memset(&s, 0, sizeof s);
    s.step = 5;
    s.steps = 8;
    s.adam_t = 5;
    s.lambda = nextafter(0.1, 1);
    s.calls = UINT64_MAX - 7;
    s.calls0 = 12345;
    s.args[0] = a0;
    s.args[1] = a1;
    s.nargs = 2;
    s.init_dir = init;
    memcpy(s.init_hash, "0123456789abcdef0123456789abcdef", 33);
    s.run_name = run;
    s.ckpt_every = 3;
    return s;
}

static void test_roundtrip(void **st)
{
    (void)st;
    qs_grpo_ckpt_state s = sample(), r;
    qs_err e = {{0}};
    assert_int_equal(qs_grpo_state_write(g_path, &s, &e), 0);
    assert_int_equal(qs_grpo_state_read(g_dir, &r, &e), 0);
    assert_int_equal(r.step, 5);
    assert_int_equal(r.steps, 8);
    assert_int_equal(r.adam_t, 5);
    assert_true(r.lambda == s.lambda);
    assert_true(r.calls == s.calls && r.calls0 == s.calls0);
    assert_int_equal(r.nargs, 2);
    assert_string_equal(r.args[1], "--lr=0.001");
    assert_null(r.model);
    assert_string_equal(r.init_dir, "/x/m0");
    assert_string_equal(r.init_hash, s.init_hash);
    assert_string_equal(r.run_name, "rl/grpo/arith/s2");
    assert_int_equal(r.ckpt_every, 3);
    qs_grpo_state_free(&r);
}

/* A state with one field changed must be refused with the file and the field named. */
static void refused(const char *from, const char *to, const char *field)
{
    qs_grpo_ckpt_state s = sample(), r;
    qs_err e = {{0}};
    assert_int_equal(qs_grpo_state_write(g_path, &s, &e), 0);
    FILE *f = fopen(g_path, "r");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strstr(buf, from), out[4096];
    assert_non_null(p);
    snprintf(out, sizeof out, "%.*s%s%s", (int)(p - buf), buf, to, p + strlen(from));
    f = fopen(g_path, "w");
    fputs(out, f);
    fclose(f);
    assert_int_equal(qs_grpo_state_read(g_dir, &r, &e), -1);
    assert_non_null(strstr(e.msg, QS_GRPO_STATE_FILE));
    assert_non_null(strstr(e.msg, field));
}

static void test_refusals(void **st)
{
    (void)st;
    refused("\"step\": 5", "\"step\": 9", "step 9");
    refused("\"adam_t\": 5", "\"adam_t\": 4", "adam_t");
    refused("\"sr_calls\": \"", "\"sr_calls\": \"x", "sr_calls");
    refused("\"init_hash\": \"0123", "\"init_hash\": \"Z123", "init_hash");
    refused("\"lambda\": ", "\"lambda\": \"a\", \"_\": ", "lambda");
    refused("\"--lr=0.001\"", "\"lr\"", "args[1]");
    refused("\"checkpoint_every\": 3", "\"checkpoint_every\": 0", "checkpoint_every");
    refused("grpo_state", "trainer_state", "not a qscope grpo state");
    refused("\"step\": 5,", "\"step\": 5", "line");
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
