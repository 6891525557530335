/*
** Progress of an evaluation (see llm_progress.h).
*/
#include "llm_progress.h"

#include <stdio.h>
#include <unistd.h>

#include "par.h"
#include "../../kernels/qs_clock.h"

#define LOG_EVERY_S 30.0

void qs_llm_progress_init(qs_llm_progress *p, const char *what, int ctx, int upto)
{
    *p = (qs_llm_progress){what, qs_par_isatty(STDERR_FILENO), ctx, upto, qs_now_s(), 0, -1, 0};
    p->last = p->t0;
}

/* h:mm:ss or m:ss */
static void clock_text(double s, char *buf, size_t cap)
{
    long t = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

void qs_llm_progress_tick(void *ctx, const qs_eval_tick *t)
{
    qs_llm_progress *p = ctx;
    const double now = qs_now_s();
    if (p->computed0 < 0) { p->computed0 = t->computed; p->t0 = now; }   /* the rate counts this run's chunks */
    const int done = t->computed - p->computed0;
    const int last = t->complete >= t->total;
    if (!p->tty && (last || now - p->last < LOG_EVERY_S)) return;
    if (p->tty && !last && now - p->last < 0.2 && done) return;
    p->last = now;
    char line[200], left[32] = "?";
    const double el = now - p->t0;
    int n = snprintf(line, sizeof line, "%s: chunk %d/%d", p->what, t->complete, t->total);
    if (t->todo < t->total) n += snprintf(line + n, sizeof line - (size_t)n, " (%d to compute)", t->todo);
    if (done > 0 && el > 0) {
        clock_text((double)(t->todo - t->computed) * el / done, left, sizeof left);
        snprintf(line + n, sizeof line - (size_t)n, ", %.0f tokens/s, %s%s left", (double)done * p->ctx / el,
                 p->upto ? "at most " : "", left);
    }
    if (p->tty) fprintf(stderr, "\r\033[K%s", line);
    else fprintf(stderr, "qscope: %s\n", line);
    fflush(stderr);
    p->shown = 1;
}

void qs_llm_progress_end(qs_llm_progress *p)
{
    if (p->tty && p->shown) fprintf(stderr, "\r\033[K");
    fflush(stderr);
    p->shown = 0;
}
