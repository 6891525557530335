/*
** Tasks with verifiable rewards for `qscope rl grpo` (issue 27): prompts made from a seed, the exact
** answer, the reward of a completion, and solved examples as text for pre-training the default policy.
**
**   arith   "A+B=" with A, B in 1..9 (the spirit of `llm score --task arith`), answers of 1-2 digits
**   add     "A+B=" with A, B in 10..99 (2 digits, carries), answers of 2-3 digits (3-4 digit operands
**           were tried first: the 2-layer default policy learns none of them in 5 minutes)
**
** A solved example is the line "A+B=C\n"; a prompt is "\n" followed by "A+B=" (so it starts a line,
** as every example after the first does in the pre-training text), and a completion ends at its
** first newline.  Reward: 1 when the completion up to its first newline (or its end) is exactly the
** answer's digits, else 0 (no partial credit).  Everything is a pure function of (task, seed, index).
*/
#ifndef QS_RL_TASK_H
#define QS_RL_TASK_H

#include <stddef.h>
#include <stdint.h>

typedef enum qs_rl_task { QS_RL_TASK_ARITH = 0, QS_RL_TASK_ADD, QS_RL_TASK_COUNT } qs_rl_task;

#define QS_RL_TASK_NAMES "arith, add"
#define QS_RL_TASK_PROMPT_MAX 32      /* bytes of a prompt, NUL included */
#define QS_RL_TASK_ANSWER_MAX 8       /* bytes of an answer, NUL included */

/* The task of that name, or -1. */
int qs_rl_task_find(const char *name);
const char *qs_rl_task_name(qs_rl_task t);
/* Longest answer in bytes, without the newline. */
int qs_rl_task_answer_len(qs_rl_task t);

/* Problem `index` of the stream `seed`: its prompt ("\nA+B=") and answer ("C"), NUL-terminated. */
void qs_rl_task_prompt(qs_rl_task t, uint64_t seed, uint64_t index, char prompt[QS_RL_TASK_PROMPT_MAX],
                       char answer[QS_RL_TASK_ANSWER_MAX]);
/* 1 when the n bytes of completion, up to the first '\n', are exactly answer; else 0. */
double qs_rl_task_reward(const char *answer, const char *completion, size_t n);
/* Solved examples "A+B=C\n" of problems 0 .. nlines-1 of seed into buf (cap bytes); returns the bytes
** written (whole lines only, NUL-terminated when room is left). */
size_t qs_rl_task_text(qs_rl_task t, uint64_t seed, size_t nlines, char *buf, size_t cap);

#endif
