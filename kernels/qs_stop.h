/*
** A stop asked for by a signal: the CLI's SIGINT/SIGTERM handler sets it (app/cli/stop_signal.h) and
** long computations (`llm eval`, `llm sensitivity`) check it between their steps, so Ctrl-C ends a run
** within a step and what was finished stays stored.
*/
#ifndef QS_STOP_H
#define QS_STOP_H

/* Async-signal-safe: record that signal sig asks for a stop. */
void qs_stop_request(int sig);
/* The signal that asked for a stop, 0 when none. */
int qs_stop_requested(void);
void qs_stop_reset(void);

#endif
