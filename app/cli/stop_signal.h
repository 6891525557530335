/*
** Ctrl-C (SIGINT) and SIGTERM during a long run: the first asks the computation to stop
** (kernels/qs_stop.h) so it ends within a step, keeps what it finished and says so; the handler is
** then reset, so a second one ends the process at once.  Under mpirun (more than one rank) SIGTERM
** stays with the MPI layer (app/cli/par.c), which ends the job.
*/
#ifndef QS_STOP_SIGNAL_H
#define QS_STOP_SIGNAL_H

/* Signals back to their default action (also an inherited "ignore": a run started in the background
** by a script still stops on SIGINT); call where an interruption loses nothing. */
void qs_stop_signals_default(void);
/* Install the handlers (from here on a signal asks for a stop). */
void qs_stop_signals_on(void);
/* The exit status of a stopped run: 128 + the signal (130 for SIGINT), 0 when no stop was asked. */
int qs_stop_status(void);
/* "SIGINT" or "SIGTERM". */
const char *qs_stop_name(void);

#endif
