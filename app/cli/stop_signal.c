/*
** SIGINT / SIGTERM as a stop request (see stop_signal.h).
*/
#include "stop_signal.h"

#include <signal.h>
#include <string.h>

#include "par.h"
#include "../../kernels/qs_stop.h"

static void on_signal(int sig) { qs_stop_request(sig); }

void qs_stop_signals_default(void)
{
    signal(SIGINT, SIG_DFL);
    if (qs_par_size() == 1) signal(SIGTERM, SIG_DFL);
}

void qs_stop_signals_on(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;   /* a second signal ends the process */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (qs_par_size() == 1) sigaction(SIGTERM, &sa, NULL);
}

int qs_stop_status(void)
{
    int s = qs_stop_requested();
    return s ? 128 + s : 0;
}

const char *qs_stop_name(void) { return qs_stop_requested() == SIGTERM ? "SIGTERM" : "SIGINT"; }
