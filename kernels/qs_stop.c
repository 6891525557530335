/*
** The stop flag (see qs_stop.h).
*/
#include "qs_stop.h"

#include <signal.h>

static volatile sig_atomic_t g_stop;

void qs_stop_request(int sig) { g_stop = sig ? sig : 1; }
int qs_stop_requested(void) { return g_stop; }
void qs_stop_reset(void) { g_stop = 0; }
