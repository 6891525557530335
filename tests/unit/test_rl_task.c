/*
** Tasks with verifiable rewards (analysis/rl_task.c): prompts and answers from a seed, rewards of
** correct, wrong and garbled completions, the pre-training text.
*/
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

#include "../../analysis/rl_task.h"

static void test_names(void **st)
{
    (void)st;
    assert_int_equal(qs_rl_task_find("arith"), QS_RL_TASK_ARITH);
    assert_int_equal(qs_rl_task_find("add"), QS_RL_TASK_ADD);
    assert_int_equal(qs_rl_task_find("sort"), -1);
    assert_int_equal(qs_rl_task_find(NULL), -1);
    assert_string_equal(qs_rl_task_name(QS_RL_TASK_ADD), "add");
}

/* Every prompt is "\nA+B=" with A, B in the task's range and the answer A+B; same seed, same prompts. */
static void check_prompts(qs_rl_task t, long lo, long hi)
{
    int seen_carry = 0, seen_lo = 0, seen_hi = 0;
    for (uint64_t i = 0; i < 2000; i++) {
        char p[QS_RL_TASK_PROMPT_MAX], a[QS_RL_TASK_ANSWER_MAX], p2[QS_RL_TASK_PROMPT_MAX], a2[QS_RL_TASK_ANSWER_MAX];
        qs_rl_task_prompt(t, 7, i, p, a);
        qs_rl_task_prompt(t, 7, i, p2, a2);
        assert_string_equal(p, p2);
        assert_string_equal(a, a2);
        long x, y;
        char eq = 0;
        assert_int_equal(sscanf(p, "\n%ld+%ld%c", &x, &y, &eq), 3);
        assert_int_equal(eq, '=');
        assert_int_equal(p[strlen(p) - 1], '=');
        assert_true(x >= lo && x <= hi && y >= lo && y <= hi);
        assert_int_equal(atol(a), x + y);
        assert_true((int)strlen(a) <= qs_rl_task_answer_len(t));
        seen_lo |= x <= lo + (hi - lo) / 50; seen_hi |= x >= hi - (hi - lo) / 50;
        seen_carry |= (x % 10) + (y % 10) >= 10;
    }
    assert_true(seen_lo && seen_hi && seen_carry);
    char p0[QS_RL_TASK_PROMPT_MAX], a0[QS_RL_TASK_ANSWER_MAX], p1[QS_RL_TASK_PROMPT_MAX], a1[QS_RL_TASK_ANSWER_MAX];
    int differ = 0;
    for (uint64_t i = 0; i < 20; i++) {   /* another seed, other prompts */
        qs_rl_task_prompt(t, 7, i, p0, a0);
        qs_rl_task_prompt(t, 8, i, p1, a1);
        differ += strcmp(p0, p1) != 0;
    }
    assert_true(differ >= 10);
}
static void test_prompts_arith(void **st) { (void)st; check_prompts(QS_RL_TASK_ARITH, 1, 9); }
static void test_prompts_add(void **st) { (void)st; check_prompts(QS_RL_TASK_ADD, 10, 99); }

#define R(ans, s) qs_rl_task_reward(ans, s, sizeof(s) - 1)
static void test_rewards(void **st)
{
    (void)st;
    assert_true(R("12", "12\n") == 1);
    assert_true(R("12", "12") == 1);             /* ran out of tokens right after the answer */
    assert_true(R("12", "12\n7+5=12\n") == 1);   /* what follows the first line does not count */
    assert_true(R("12", "13\n") == 0);
    assert_true(R("12", "1\n") == 0);
    assert_true(R("12", "123\n") == 0);
    assert_true(R("12", " 12\n") == 0);
    assert_true(R("12", "12 \n") == 0);
    assert_true(R("12", "\n12\n") == 0);
    assert_true(R("12", "") == 0);
    assert_true(R("12", "\xff\x00" "12") == 0);
    assert_true(R("110", "110\n") == 1);
    assert_true(R("110", "11\n0") == 0);
    assert_true(qs_rl_task_reward("12", "12\0", 3) == 0);   /* a NUL byte is not the end */
}

/* The text is the solved problems, one per line, in order, whole lines only. */
static void test_text(void **st)
{
    (void)st;
    char buf[4096];
    size_t n = qs_rl_task_text(QS_RL_TASK_ADD, 3, 50, buf, sizeof buf);
    assert_true(n > 0 && n < sizeof buf && buf[n - 1] == '\n' && buf[n] == 0);
    const char *p = buf;
    for (uint64_t i = 0; i < 50; i++) {
        char pr[QS_RL_TASK_PROMPT_MAX], a[QS_RL_TASK_ANSWER_MAX], line[64];
        qs_rl_task_prompt(QS_RL_TASK_ADD, 3, i, pr, a);
        snprintf(line, sizeof line, "%s%s\n", pr + 1, a);
        assert_memory_equal(p, line, strlen(line));
        p += strlen(line);
    }
    assert_int_equal((size_t)(p - buf), n);
    char small[20];
    size_t k = qs_rl_task_text(QS_RL_TASK_ARITH, 3, 50, small, sizeof small);
    assert_true(k < sizeof small && small[k - 1] == '\n');
    assert_int_equal(qs_rl_task_text(QS_RL_TASK_ARITH, 3, 0, small, sizeof small), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),         cmocka_unit_test(test_prompts_arith), cmocka_unit_test(test_prompts_add),
        cmocka_unit_test(test_rewards),       cmocka_unit_test(test_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
