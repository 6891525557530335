/*
** The workbench's worker thread.  One job at a time:
**   TJ_ANALYZE  analyze one tensor under a list of formats (with per-block data), through the same
**               cached path as `qscope analyze --blocks` (qs_analyze_one_cb), on its own database
**               connection; progress is reported per band, Esc cancels (nothing is stored);
**   TJ_COMMAND  run a qscope subcommand (`:` command line) as a child process of this binary,
**               stdout and stderr captured; Esc kills the child.
** When a job ends the worker writes one byte to a self-pipe so the main loop wakes at once.
*/
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli/analyze_run.h"
#include "../cli/quant_opts.h"
#include "tui.h"
#include "../../store/tensor.h"

extern char **environ;

static int on_progress(void *ctx, uint64_t done, uint64_t total)
{
    tui_job *j = ctx;
    pthread_mutex_lock(&j->mu);
    j->done = done;
    j->total = total;
    int c = j->cancel;
    pthread_mutex_unlock(&j->mu);
    return c;
}

static void run_analyze(tui_job *j)
{
    qs_err e = {{0}};
    qs_db *db = qs_db_open(j->db_path, &e);
    qs_tensor_rec t;
    memset(&t, 0, sizeof t);
    int ok = 0, cached = 0, computed = 0;
    if (!db || qs_tensor_get(db, j->tensor, &t, &e)) goto out;
    for (int i = 0; i < j->napps; i++) {
        pthread_mutex_lock(&j->mu);
        j->step = i;
        j->done = 0;
        j->total = 0;
        char fl[96];
        qs_quant_label(&j->apps[i], NULL, fl, sizeof fl);
        snprintf(j->label, sizeof j->label, "analyze %s %s", j->tensor, fl);
        int c = j->cancel;
        pthread_mutex_unlock(&j->mu);
        if (c) { qs_fail(&e, "cancelled"); goto out; }
        int was = 0;
        if (qs_analyze_one_cb(db, &t, &j->apps[i], 1, j->force, 2, on_progress, j, NULL, NULL, &was, &e)) {
            if (j->cancel) qs_fail(&e, "cancelled");
            goto out;
        }
        cached += was;
        computed += !was;
    }
    ok = 1;
out:
    pthread_mutex_lock(&j->mu);
    /* a result read from the store was not computed now; one computed now is stored */
    if (ok && (!computed || !cached))
        snprintf(j->msg, sizeof j->msg, "analyzed %s: %d format%s %s", j->tensor, computed + cached,
                 computed + cached == 1 ? "" : "s", cached ? "from cache" : "computed and stored");
    else if (ok)
        snprintf(j->msg, sizeof j->msg, "analyzed %s: %d formats: %d computed and stored, %d from cache", j->tensor,
                 computed + cached, computed, cached);
    else snprintf(j->msg, sizeof j->msg, "analysis of %.100s stopped: %.300s", j->tensor, e.msg[0] ? e.msg : "error");
    j->exit_code = ok ? 0 : 1;
    pthread_mutex_unlock(&j->mu);
    qs_tensor_rec_free(&t);
    qs_db_close(db);
}

static void run_command(tui_job *j)
{
    int p[2];
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int code = -1;
    if (pipe(p)) { snprintf(j->msg, sizeof j->msg, "cannot run the command: %s", strerror(errno)); return; }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, j->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc) {
        close(p[0]);
        snprintf(j->msg, sizeof j->msg, "cannot run the command: %s", strerror(rc));
        return;
    }
    pthread_mutex_lock(&j->mu);
    j->child = pid;
    pthread_mutex_unlock(&j->mu);
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        ssize_t r = read(p[0], buf + len, 4096);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
        if (len > (64u << 20)) break;   /* keep at most 64 MiB of output */
        pthread_mutex_lock(&j->mu);
        j->done = len;
        pthread_mutex_unlock(&j->mu);
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (buf) buf[len] = 0;
    pthread_mutex_lock(&j->mu);
    j->child = 0;
    free(j->output);
    j->output = buf;
    j->output_len = len;
    j->exit_code = code;
    if (j->cancel) snprintf(j->msg, sizeof j->msg, "command cancelled");
    else snprintf(j->msg, sizeof j->msg, "command finished (exit %d), output in view 7", code);
    pthread_mutex_unlock(&j->mu);
}

static void run_rl(tui_job *j)
{
    qs_err e = {{0}};
    qs_db *db = qs_db_open(j->db_path, &e);
    tui_rlc *out = calloc((size_t)(j->rl_n ? j->rl_n : 1), sizeof *out);
    int done = 0;
    if (db && out) {
        for (int i = 0; i < j->rl_n; i++) {
            pthread_mutex_lock(&j->mu);
            j->step = i;
            int c = j->cancel;
            pthread_mutex_unlock(&j->mu);
            if (c) { qs_fail(&e, "cancelled"); break; }
            if (tui_rl_compute(db, j->rl_runs[i], &out[done], &e)) break;
            done++;
        }
    }
    qs_db_close(db);
    pthread_mutex_lock(&j->mu);
    j->rl_out = out;
    j->rl_done = done;
    if (done == j->rl_n) snprintf(j->msg, sizeof j->msg, "diagnostics of %d RL run%s computed", done, done == 1 ? "" : "s");
    else snprintf(j->msg, sizeof j->msg, "RL diagnostics stopped: %.300s", e.msg[0] ? e.msg : "out of memory");
    j->exit_code = done == j->rl_n ? 0 : 1;
    pthread_mutex_unlock(&j->mu);
}

static void *worker(void *arg)
{
    tui_job *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->quit && (j->kind == TJ_NONE || j->busy == 0)) pthread_cond_wait(&j->cv, &j->mu);
        if (j->quit) break;
        tui_job_kind k = j->kind;
        pthread_mutex_unlock(&j->mu);
        if (k == TJ_ANALYZE) run_analyze(j);
        else if (k == TJ_COMMAND) run_command(j);
        else if (k == TJ_RL) run_rl(j);
        pthread_mutex_lock(&j->mu);
        j->kind = TJ_NONE;
        j->busy = 0;
        j->finished = 1;
        if (j->argv) { for (char **a = j->argv; *a; a++) free(*a); free(j->argv); j->argv = NULL; }
        free(j->tensor);
        j->tensor = NULL;
        free(j->rl_runs);
        j->rl_runs = NULL;
        char c = 1;
        if (write(j->wake_fd[1], &c, 1) < 0) {}
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

int tui_job_init(tui_job *j, const char *db_path)
{
    memset(j, 0, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->db_path = strdup(db_path);
    if (!j->db_path || pipe(j->wake_fd)) return -1;
    fcntl(j->wake_fd[0], F_SETFL, O_NONBLOCK);
    fcntl(j->wake_fd[1], F_SETFL, O_NONBLOCK);
    fcntl(j->wake_fd[0], F_SETFD, FD_CLOEXEC);
    fcntl(j->wake_fd[1], F_SETFD, FD_CLOEXEC);
    if (pthread_create(&j->th, NULL, worker, j)) return -1;
    j->started = 1;
    return 0;
}

void tui_job_cancel(tui_job *j)
{
    pthread_mutex_lock(&j->mu);
    if (j->busy) {
        j->cancel = 1;
        if (j->child > 0) kill(j->child, SIGTERM);
    }
    pthread_mutex_unlock(&j->mu);
}

void tui_job_stop(tui_job *j)
{
    if (j->started) {
        tui_job_cancel(j);
        pthread_mutex_lock(&j->mu);
        j->quit = 1;
        pthread_cond_signal(&j->cv);
        pthread_mutex_unlock(&j->mu);
        pthread_join(j->th, NULL);
        j->started = 0;
    }
    if (j->wake_fd[0] > 0) { close(j->wake_fd[0]); close(j->wake_fd[1]); }
    free(j->output);
    free(j->db_path);
    free(j->tensor);
    free(j->rl_runs);
    if (j->rl_out) { for (int i = 0; i < j->rl_done; i++) tui_rlc_free(&j->rl_out[i]); free(j->rl_out); }
    if (j->argv) { for (char **a = j->argv; *a; a++) free(*a); free(j->argv); }
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
}

int tui_job_analyze(tui_job *j, const char *tensor, const qs_apply *apps, int n, int force)
{
    pthread_mutex_lock(&j->mu);
    if (j->busy || n <= 0) { pthread_mutex_unlock(&j->mu); return -1; }
    j->kind = TJ_ANALYZE;
    free(j->tensor);
    j->tensor = strdup(tensor);
    if (n > TUI_MAX_FMTS) n = TUI_MAX_FMTS;
    memcpy(j->apps, apps, (size_t)n * sizeof *apps);
    j->napps = n;
    j->nsteps = n;
    j->step = 0;
    j->force = force;
    j->cancel = 0;
    j->done = j->total = 0;
    j->busy = 1;
    snprintf(j->label, sizeof j->label, "analyze %s", tensor);
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

int tui_job_rl(tui_job *j, const int64_t *runs, int n)
{
    pthread_mutex_lock(&j->mu);
    if (j->busy || n <= 0) { pthread_mutex_unlock(&j->mu); return -1; }
    free(j->rl_runs);
    j->rl_runs = malloc((size_t)n * sizeof *runs);
    if (!j->rl_runs) { pthread_mutex_unlock(&j->mu); return -1; }
    memcpy(j->rl_runs, runs, (size_t)n * sizeof *runs);
    j->rl_n = n;
    j->kind = TJ_RL;
    j->nsteps = n;
    j->step = 0;
    j->cancel = 0;
    j->done = j->total = 0;
    j->busy = 1;
    snprintf(j->label, sizeof j->label, "RL diagnostics of %d run%s", n, n == 1 ? "" : "s");
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

int tui_job_command(tui_job *j, char **argv)
{
    pthread_mutex_lock(&j->mu);
    if (j->busy) { pthread_mutex_unlock(&j->mu); return -1; }
    j->kind = TJ_COMMAND;
    j->argv = argv;
    j->nsteps = 0;
    j->cancel = 0;
    j->done = j->total = 0;
    j->busy = 1;
    snprintf(j->label, sizeof j->label, "running: qscope");
    /* argv is qscope --db PATH ARGS...: show the ARGS */
    char **first = argv[1] && argv[2] && !strcmp(argv[1], "--db") ? argv + 3 : argv + 1;
    for (char **a = first; *a; a++) {
        size_t k = strlen(j->label);
        if (k + 2 < sizeof j->label) snprintf(j->label + k, sizeof j->label - k, " %s", *a);
    }
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return 0;
}
