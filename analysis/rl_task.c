/* Tasks with verifiable rewards (rl_task.h). */
#include "rl_task.h"

#include <stdio.h>
#include <string.h>

#include "../kernels/sr.h"

static const char *const kNames[QS_RL_TASK_COUNT] = {"arith", "add"};

int qs_rl_task_find(const char *name)
{
    for (int i = 0; i < QS_RL_TASK_COUNT; i++)
        if (name && !strcmp(name, kNames[i])) return i;
    return -1;
}

const char *qs_rl_task_name(qs_rl_task t) { return t >= 0 && t < QS_RL_TASK_COUNT ? kNames[t] : "?"; }

int qs_rl_task_answer_len(qs_rl_task t) { return t == QS_RL_TASK_ADD ? 3 : 2; }

/* An integer in lo..hi from (seed, index, which): counter-based, the same on every machine. */
static long draw(uint64_t seed, uint64_t index, int which, long lo, long hi)
{
    double u = qs_sr_uniform(seed ^ 0x5254415348ULL, index * 4 + (uint64_t)which);
    long v = lo + (long)(u * (double)(hi - lo + 1));
    return v > hi ? hi : v;
}

static void operands(qs_rl_task t, uint64_t seed, uint64_t index, long *a, long *b)
{
    long lo = t == QS_RL_TASK_ADD ? 10 : 1, hi = t == QS_RL_TASK_ADD ? 99 : 9;
    *a = draw(seed, index, 0, lo, hi);
    *b = draw(seed, index, 1, lo, hi);
}

void qs_rl_task_prompt(qs_rl_task t, uint64_t seed, uint64_t index, char prompt[QS_RL_TASK_PROMPT_MAX],
                       char answer[QS_RL_TASK_ANSWER_MAX])
{
    long a, b;
    operands(t, seed, index, &a, &b);
    snprintf(prompt, QS_RL_TASK_PROMPT_MAX, "\n%ld+%ld=", a, b);
    snprintf(answer, QS_RL_TASK_ANSWER_MAX, "%ld", a + b);
}

double qs_rl_task_reward(const char *answer, const char *completion, size_t n)
{
    const char *nl = memchr(completion, '\n', n);
    size_t len = nl ? (size_t)(nl - completion) : n;
    return len == strlen(answer) && !memcmp(completion, answer, len) ? 1.0 : 0.0;
}

size_t qs_rl_task_text(qs_rl_task t, uint64_t seed, size_t nlines, char *buf, size_t cap)
{
    size_t o = 0;
    for (uint64_t i = 0; i < nlines; i++) {
        long a, b;
        operands(t, seed, i, &a, &b);
        char line[48];
        int k = snprintf(line, sizeof line, "%ld+%ld=%ld\n", a, b, a + b);
        if (o + (size_t)k >= cap) break;
        memcpy(buf + o, line, (size_t)k);
        o += (size_t)k;
    }
    if (o < cap) buf[o] = 0;
    return o;
}
