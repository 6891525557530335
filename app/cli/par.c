/*
** The MPI layer (see par.h).
**
** libmpi is dlopen'ed only under a launcher: linking it costs every plain run (the workbench, `ls`)
** milliseconds of library loading (BENCHMARKS.md).  The protocol of qs_par_run, on MPI_COMM_WORLD:
**   worker -> 0   T_HDR {unit, len, kind} then the len bytes as T_DATA chunks: one per result,
**                 a failure (the bytes are the message), and finally "done";
**   0 -> worker   T_FINAL {rc, message}: exactly one per run, early (stop: a rank failed) or after
**                 rank 0 stored everything; workers look for it between units.
** Rank 0 computes its own units on the calling thread while a receiver thread takes the workers'
** messages (the only MPI caller meanwhile: MPI_THREAD_SERIALIZED) and keeps the progress line.
** Received results wait in memory, past QS_PAR_MEM bytes in an unlinked scratch file.
** When a rank dies, mpirun ends the whole job (SIGTERM to the others); rank 0 then says so in one line.
** A rank that stalls without dying (SIGSTOP) is found by the watchdog: a thread on every rank that, on
** a communicator of its own, sends rank 0 (rank 0: every rank) an empty message every few seconds and
** ends the job with MPI_Abort when its peer has been silent for --rank-timeout seconds.  Beats come
** from that thread, so a unit of any length keeps its rank alive; MPI_THREAD_MULTIPLE lets it call
** MPI beside the other threads.  A rank whose process runs but whose main thread hangs (a hung
** filesystem read) keeps beating: only mpirun's --timeout bounds that.
*/
#include "par.h"
#include "../../kernels/qs_clock.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#ifdef QS_HAVE_MPI
#include <mpi.h>
#endif

#ifndef QS_LIBMPI
#define QS_LIBMPI "libmpi.so"
#endif

static int g_rank, g_size = 1, g_world = 1;   /* g_size is 1 on a rank 0 running alone */
static double g_timeout = QS_PAR_TIMEOUT_DEFAULT;

void qs_par_set_timeout(double seconds) { g_timeout = seconds; }

int qs_par_rank(void) { return g_rank; }
int qs_par_size(void) { return g_size; }

/* ---- the schedule ---- */

typedef struct { double load; int rank; } slot_load;

static int load_less(const slot_load *a, const slot_load *b)
{
    return a->load < b->load || (a->load == b->load && a->rank < b->rank);
}

static int by_cost_desc(const void *pa, const void *pb, void *ctx)
{
    const double *cost = ctx;
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    double ca = cost[a], cb = cost[b];
    if (!(ca >= 0)) ca = 0;
    if (!(cb >= 0)) cb = 0;
    if (ca != cb) return ca > cb ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* Longest processing time first: each unit, largest first, to the least loaded rank (a min-heap of
** (load, rank), so the same costs always give the same schedule on every rank). */
void qs_par_assign(size_t n, const double *cost, int nranks, int *owner)
{
    if (nranks <= 1 || n == 0) {
        for (size_t i = 0; i < n; i++) owner[i] = 0;
        return;
    }
    size_t *ord = malloc(n * sizeof *ord);
    slot_load *h = malloc((size_t)nranks * sizeof *h);
    if (!ord || !h) {   /* no memory for a schedule: round robin is still a deterministic one */
        for (size_t i = 0; i < n; i++) owner[i] = (int)(i % (size_t)nranks);
        free(ord);
        free(h);
        return;
    }
    for (size_t i = 0; i < n; i++) ord[i] = i;
    qsort_r(ord, n, sizeof *ord, by_cost_desc, (void *)cost);
    for (int r = 0; r < nranks; r++) h[r] = (slot_load){0, r};   /* ascending: already a heap */
    for (size_t k = 0; k < n; k++) {
        size_t i = ord[k];
        double c = cost[i] >= 0 ? cost[i] : 0;
        owner[i] = h[0].rank;
        h[0].load += c;
        for (int p = 0;;) {   /* sift down */
            int l = 2 * p + 1, r = l + 1, m = p;
            if (l < nranks && load_less(&h[l], &h[m])) m = l;
            if (r < nranks && load_less(&h[r], &h[m])) m = r;
            if (m == p) break;
            slot_load t = h[p];
            h[p] = h[m];
            h[m] = t;
            p = m;
        }
    }
    free(ord);
    free(h);
}

/* ---- progress (rank 0, on a terminal) ---- */

typedef struct {
    const char *what;
    int tty, nranks;
    size_t n, done;
    double total, done_cost, last_t;
    pthread_mutex_t mu;
} progress;

static void progress_add(progress *p, double cost)
{
    if (!p->what || !p->tty) return;
    pthread_mutex_lock(&p->mu);
    p->done++;
    p->done_cost += cost >= 0 ? cost : 0;
    double t = qs_now_s();
    if (t - p->last_t >= 0.1 || p->done == p->n) {
        double f = p->total > 0 ? p->done_cost / p->total : (double)p->done / (double)(p->n ? p->n : 1);
        int w = 30, k = (int)(f * w);
        fprintf(stderr, "\r\033[K[%.*s%*s] %3.0f%% %s  %zu/%zu on %d rank%s", k, "##############################", w - k, "",
                100 * f, p->what, p->done, p->n, p->nranks, p->nranks == 1 ? "" : "s");
        p->last_t = t;
    }
    pthread_mutex_unlock(&p->mu);
}

static void progress_end(progress *p)
{
    if (p->what && p->tty && p->done) fprintf(stderr, "\r\033[K");
}

/* Under mpirun a rank's stdout is a pseudo-terminal and its stderr a pipe, whatever the user's are:
** the launcher's own descriptors (it is the parent of the ranks it starts on its node) tell. */
int qs_par_isatty(int fd)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK")) return isatty(fd);
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", (long)getppid(), fd);
    int pfd = open(path, O_WRONLY | O_NOCTTY);
    if (pfd < 0) return 0;
    int t = isatty(pfd);
    close(pfd);
    return t;
}

/* ---- one rank: units in order, each stored right away ---- */

static int run_local(size_t n, const double *cost, qs_par_unit_fn fn, qs_par_collect_fn collect, void *ctx,
                     progress *pg, qs_err *e)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t *b = NULL;
        size_t len = 0;
        int rc = fn(i, ctx, &b, &len, e) || collect(i, b, len, ctx, e);
        free(b);
        if (rc) return -1;
        progress_add(pg, cost ? cost[i] : 1);
    }
    return 0;
}

#ifndef QS_HAVE_MPI

int qs_par_init(int *argc, char ***argv, qs_err *e)
{
    (void)argc;
    (void)argv;
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"))
        return qs_fail(e, "launched by mpirun, but this qscope was built without Open MPI");
    return 0;
}
void qs_par_finalize(void) {}
int qs_par_exit(int rc) { return rc; }
void qs_par_barrier(void) {}
int qs_par_hold_error(const char *msg) { (void)msg; return 0; }
void qs_par_alone(void) {}
int qs_par_sum_f32(float *x, size_t n, qs_err *e) { (void)x; (void)n; (void)e; return 0; }
int qs_par_sum_f64(double *x, size_t n, qs_err *e) { (void)x; (void)n; (void)e; return 0; }
void qs_par_training(int on) { (void)on; }

int qs_par_run(size_t n, const double *cost, qs_par_unit_fn fn, qs_par_collect_fn collect, void *ctx,
               const char *what, qs_err *e)
{
    progress pg = {.what = what, .tty = qs_par_isatty(STDERR_FILENO), .nranks = 1, .n = n, .last_t = -1};
    pthread_mutex_init(&pg.mu, NULL);
    for (size_t i = 0; cost && i < n; i++) pg.total += cost[i] >= 0 ? cost[i] : 0;
    int rc = run_local(n, cost, fn, collect, ctx, &pg, e);
    progress_end(&pg);
    pthread_mutex_destroy(&pg.mu);
    return rc;
}

#else

/* ---- libmpi, loaded at run time ---- */

static struct {
    void *lib;
    int (*Init_thread)(int *, char ***, int, int *);
    int (*Comm_rank)(MPI_Comm, int *);
    int (*Comm_size)(MPI_Comm, int *);
    int (*Comm_set_errhandler)(MPI_Comm, MPI_Errhandler);
    int (*Finalize)(void);
    int (*Abort)(MPI_Comm, int);
    int (*Send)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
    int (*Isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*Comm_dup)(MPI_Comm, MPI_Comm *);
    int (*Recv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
    int (*Iprobe)(int, int, MPI_Comm, int *, MPI_Status *);
    int (*Barrier)(MPI_Comm);
    int (*Ibarrier)(MPI_Comm, MPI_Request *);
    int (*Test)(MPI_Request *, int *, MPI_Status *);
    int (*Error_string)(int, char *, int *);
    int (*Alltoallv)(const void *, const int *, const int *, MPI_Datatype, void *, const int *, const int *, MPI_Datatype,
                     MPI_Comm);
    int (*Allgatherv)(const void *, int, MPI_Datatype, void *, const int *, const int *, MPI_Datatype, MPI_Comm);
    MPI_Comm world;
    MPI_Datatype byte;
    MPI_Errhandler errors_return;
} M;

static int g_mpi;
/* The sums' scratch, kept from step to step (a fresh 16 MB buffer each step costs its page faults). */
static char *g_sum_tmp;
static size_t g_sum_cap;

#define QS_PAR_EXIT_WAIT_S 10.0
/* 0 outside a run, 1 computing, 2 storing, 3 leaving, 4 training (qs_par_training); read by the watchdog and the SIGTERM handler */
static atomic_int g_phase;
static atomic_int g_stored;   /* rank 0 has stored a run's results */
static atomic_int g_quiet;    /* this rank has said why the job ends: a SIGTERM adds nothing */
/* the watchdog's last turn and the last time it found this process had been stopped, in ms */
static atomic_llong g_tick_ms, g_self_stop_ms;

static long long now_ms(void) { return (long long)(qs_now_s() * 1000); }

enum { T_HDR = 7301, T_DATA, T_FINAL };
enum { K_RESULT, K_FAIL, K_DONE };
typedef struct { uint64_t unit, len; int32_t kind, pad; } msg_hdr;
typedef struct { int32_t rc, pad; char msg[sizeof(((qs_err *)0)->msg)]; } msg_final;
#define CHUNK ((size_t)1 << 30)

#define SYM(field, name) (*(void **)&M.field = dlsym(M.lib, name))

/* An MPI call that fails leaves the protocol in an unknown state: end the job rather than hang. */
static void mpi_check(int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return;
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (M.Error_string) M.Error_string(rc, s, &len);
    fprintf(stderr, "qscope: rank %d: MPI %s failed: %s\n", g_rank, what, s);
    M.Abort(M.world, 1);
    _exit(1);
}

/* A gap in the watchdog's turns this long means the process was stopped: another rank can have found
** it silent only after 0.8 timeouts (the last beat is at most a fifth of one old). */
static long long stop_gap_ms(void) { return g_timeout / 2 > 0.5 ? (long long)(g_timeout * 500) : 500; }

/* A stopped rank 0 that mpirun ends (SIGCONT, SIGTERM) was found silent by a rank that said so:
** its watchdog has not turned since, or has just found the gap. */
static int was_stopped(void)
{
    long long t = now_ms();
    return g_tick_ms && (t - g_tick_ms > stop_gap_ms() || (g_self_stop_ms && t - g_self_stop_ms < 2000));
}

static void on_term(int sig)
{
    (void)sig;
    if (g_rank == 0 && !g_quiet && !was_stopped()) {
        static const char a[] = "qscope: the MPI job was stopped (a rank died, was killed or interrupted); "
                                "nothing of it was stored\n";
        static const char b[] = "qscope: the MPI job was stopped (a rank died, was killed or interrupted) while "
                                "its results were being stored; the unit being written was rolled back\n";
        static const char c[] = "qscope: the MPI job was stopped (a rank died, was killed or interrupted)\n";
        static const char d[] = "qscope: the MPI job was stopped (a rank died, was killed or interrupted); the training "
                                "run stopped and nothing more of it was stored\n";
        if (g_phase == 1) { if (write(STDERR_FILENO, a, sizeof a - 1) < 0) {} }
        else if (g_phase == 4) { if (write(STDERR_FILENO, d, sizeof d - 1) < 0) {} }
        else if (g_phase == 2) { if (write(STDERR_FILENO, b, sizeof b - 1) < 0) {} }
        else if (g_phase == 0 && write(STDERR_FILENO, c, sizeof c - 1) < 0) {}
    }
    _exit(1);
}

/* ---- the watchdog (see the top of this file) ---- */

enum { T_BEAT = 7401, T_BYE };
static struct {
    MPI_Comm comm;            /* a duplicate of MPI_COMM_WORLD: beats never meet the runs' messages */
    pthread_t th;
    int on;
    atomic_int stop;          /* set by qs_par_exit once every rank has arrived */
} W;
static atomic_int g_watch;    /* rank 0 judges the other ranks only while it waits for them */

/* One line naming the silent rank, then the whole job ends (MPI_Abort kills every rank, a stopped one too). */
static void silent(int peer, double s)
{
    g_quiet = 1;
    if (g_rank == 0) {
        int ph = g_phase;
        const char *what = ph == 1 ? (g_stored ? "; the results of the step under way were not stored" : "; nothing of it was stored")
                         : ph == 4 ? "; the training run stopped and nothing more of it was stored"
                         : ph == 0 && !g_stored ? "; nothing of it was stored" : "";
        fprintf(stderr, "qscope: rank %d was silent for %.0f s (--rank-timeout %g): the MPI job was stopped%s\n", peer, s,
                g_timeout, what);
    } else {
        fprintf(stderr, "qscope: rank %d: rank 0 was silent for %.0f s (--rank-timeout %g): the MPI job was stopped\n",
                g_rank, s, g_timeout);
    }
    fflush(NULL);
    M.Abort(M.world, 1);
    _exit(1);
}

/* Rank 0 beats to and hears every rank; every other rank beats to and hears rank 0.  At the end each
** sends BYE (after its last beat: MPI keeps a sender's order) and leaves once its peers' BYEs came
** and its own sends completed, so no message is left over at MPI_Finalize. */
static void *watchdog(void *arg)
{
    (void)arg;
    int lo = g_rank == 0 ? 1 : 0, hi = g_rank == 0 ? g_world : 1, npeer = hi - lo, byes = 0, bye_sent = 0;
    double *heard = calloc((size_t)g_world, sizeof *heard);
    MPI_Request *rq = calloc((size_t)g_world * 2, sizeof *rq);
    char *pend = calloc((size_t)g_world * 2, 1), *gone = calloc((size_t)g_world, 1);   /* [2p] beat, [2p+1] bye */
    if (!heard || !rq || !pend || !gone) {
        fprintf(stderr, "qscope: rank %d: out of memory\n", g_rank);
        M.Abort(M.world, 1);
        _exit(1);
    }
    /* the beat: often enough that a few late ones never look like silence; a rank > 1 waits a little
    ** longer for rank 0 so that rank 1 alone, as a rule, says rank 0 stalled */
    double beat = g_timeout / 5 < 5 ? g_timeout / 5 : 5, t0 = qs_now_s(), last = -1e300;
    double limit = g_timeout + (g_rank > 1 ? 2 : 0);
    for (int p = lo; p < hi; p++) heard[p] = t0;
    for (double prev = t0;;) {
        double now = qs_now_s();
        if (now - prev > 0.25) {   /* this process did not run (stopped itself): that time is nobody's silence */
            if (now - prev > 1e-3 * (double)stop_gap_ms()) g_self_stop_ms = now_ms();
            for (int p = lo; p < hi; p++) heard[p] += now - prev;
        }
        prev = now;
        g_tick_ms = now_ms();
        for (;;) {   /* everything that came: every message is a sign of life */
            int flag = 0;
            MPI_Status st;
            mpi_check(M.Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, W.comm, &flag, &st), "probe");
            if (!flag) break;
            mpi_check(M.Recv(NULL, 0, M.byte, st.MPI_SOURCE, st.MPI_TAG, W.comm, MPI_STATUS_IGNORE), "receive");
            heard[st.MPI_SOURCE] = now;
            if (st.MPI_TAG == T_BYE && !gone[st.MPI_SOURCE]) {
                gone[st.MPI_SOURCE] = 1;
                byes++;
            }
        }
        int busy = 0;
        for (int k = 2 * lo; k < 2 * hi; k++) {
            if (!pend[k]) continue;
            int done = 0;
            mpi_check(M.Test(&rq[k], &done, MPI_STATUS_IGNORE), "send");
            pend[k] = !done;
            busy |= pend[k];
        }
        if (!bye_sent && W.stop) {
            for (int p = lo; p < hi; p++) {
                mpi_check(M.Isend(NULL, 0, M.byte, p, T_BYE, W.comm, &rq[2 * p + 1]), "send");
                pend[2 * p + 1] = busy = 1;
            }
            bye_sent = 1;
        } else if (!bye_sent && now - last >= beat) {
            for (int p = lo; p < hi; p++) {   /* one beat in flight per peer: a stopped one gets no pile */
                if (pend[2 * p]) continue;
                mpi_check(M.Isend(NULL, 0, M.byte, p, T_BEAT, W.comm, &rq[2 * p]), "send");
                pend[2 * p] = 1;
            }
            last = now;
        }
        if (bye_sent && byes == npeer && !busy) break;
        if (g_rank > 0 || g_watch)
            for (int p = lo; p < hi; p++)
                if (!gone[p] && now - heard[p] > limit) silent(p, now - heard[p]);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    free(heard);
    free(rq);
    free(pend);
    free(gone);
    return NULL;
}

static int watchdog_start(qs_err *e)
{
    if (M.Comm_dup(M.world, &W.comm) != MPI_SUCCESS) return qs_fail(e, "MPI_Comm_dup failed");
    M.Comm_set_errhandler(W.comm, M.errors_return);
    if (pthread_create(&W.th, NULL, watchdog, NULL)) return qs_fail(e, "cannot start the MPI watchdog thread");
    W.on = 1;
    return 0;
}

/* Every rank has reached the end: the watchdogs say goodbye and stop. */
static void watchdog_stop(void)
{
    if (!W.on) return;
    W.stop = 1;
    pthread_join(W.th, NULL);
    W.on = 0;
}

int qs_par_init(int *argc, char ***argv, qs_err *e)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK")) return 0;
    /* RTLD_GLOBAL: Open MPI's own plugins resolve their symbols against libmpi */
    if (!(M.lib = dlopen(QS_LIBMPI, RTLD_NOW | RTLD_GLOBAL)))
        return qs_fail(e, "launched by mpirun, but Open MPI's library cannot be loaded: %s", dlerror());
    int ok = SYM(Init_thread, "MPI_Init_thread") && SYM(Comm_rank, "MPI_Comm_rank") && SYM(Comm_size, "MPI_Comm_size") &&
             SYM(Comm_set_errhandler, "MPI_Comm_set_errhandler") && SYM(Finalize, "MPI_Finalize") &&
             SYM(Abort, "MPI_Abort") && SYM(Send, "MPI_Send") && SYM(Recv, "MPI_Recv") && SYM(Iprobe, "MPI_Iprobe") &&
             SYM(Barrier, "MPI_Barrier") && SYM(Ibarrier, "MPI_Ibarrier") && SYM(Test, "MPI_Test") &&
             SYM(Error_string, "MPI_Error_string") && SYM(Isend, "MPI_Isend") && SYM(Comm_dup, "MPI_Comm_dup") &&
             SYM(Alltoallv, "MPI_Alltoallv") && SYM(Allgatherv, "MPI_Allgatherv");
    /* Open MPI's predefined handles are the addresses of these objects (mpi.h's MPI_COMM_WORLD etc.) */
    M.world = (MPI_Comm)dlsym(M.lib, "ompi_mpi_comm_world");
    M.byte = (MPI_Datatype)dlsym(M.lib, "ompi_mpi_byte");
    M.errors_return = (MPI_Errhandler)dlsym(M.lib, "ompi_mpi_errors_return");
    if (!ok || !M.world || !M.byte || !M.errors_return)
        return qs_fail(e, "%s is not an Open MPI library this qscope knows (missing symbols)", QS_LIBMPI);
    /* the watchdog calls MPI beside the receiver and the main thread */
    int provided = 0, need = g_timeout > 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    if (M.Init_thread(argc, argv, need, &provided) != MPI_SUCCESS)
        return qs_fail(e, "MPI_Init_thread failed");
    g_mpi = 1;
    M.Comm_set_errhandler(M.world, M.errors_return);
    M.Comm_rank(M.world, &g_rank);
    M.Comm_size(M.world, &g_size);
    g_world = g_size;
    if (provided < need) {
        if (need == MPI_THREAD_MULTIPLE)
            qs_fail(e, "the MPI library gives no MPI_THREAD_MULTIPLE support, which --rank-timeout needs "
                       "(--rank-timeout 0 runs without the watchdog)");
        else
            qs_fail(e, "the MPI library gives no MPI_THREAD_SERIALIZED support");
        M.Abort(M.world, 1);
        return -1;
    }
    if (g_world > 1 && g_timeout > 0 && watchdog_start(e)) {
        M.Abort(M.world, 1);
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    if (g_rank > 0) {   /* data comes from rank 0 alone */
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            close(fd);
        }
    }
    return 0;
}

void qs_par_barrier(void)
{
    if (!g_mpi || g_size <= 1) return;
    g_watch = 1;
    mpi_check(M.Barrier(M.world), "barrier");
    g_watch = 0;
}

void qs_par_alone(void)
{
    if (g_rank == 0) g_size = 1;
}

void qs_par_finalize(void)
{
    free(g_sum_tmp);
    g_sum_tmp = NULL;
    g_sum_cap = 0;
    if (!g_mpi) return;
    g_mpi = 0;
    M.Finalize();
}

/* The last error of a rank > 0, printed only if that rank must end the job on its own. */
static char g_held[sizeof(((qs_err *)0)->msg) + 64];

int qs_par_hold_error(const char *msg)
{
    if (!g_mpi || g_rank == 0) return 0;
    snprintf(g_held, sizeof g_held, "%s", msg);
    return 1;
}

int qs_par_exit(int rc)
{
    if (!g_mpi) return rc;
    g_phase = 3;   /* the command is over: a stop from here on says nothing new */
    g_watch = 1;   /* rank 0 waits for every rank again */
    fflush(NULL);
    if (g_world > 1) {
        /* Every rank meets here.  One that failed waits a while for the others: when they all come
        ** (the same error everywhere, or a failed run every rank left) the job ends normally.  When
        ** they do not, some rank still waits for this one (inside a run): end the whole job. */
        MPI_Request rq;
        mpi_check(M.Ibarrier(M.world, &rq), "barrier");
        double t0 = qs_now_s();
        for (int done = 0;;) {
            mpi_check(M.Test(&rq, &done, MPI_STATUS_IGNORE), "barrier");
            if (done) break;
            if (rc != 0 && qs_now_s() - t0 > QS_PAR_EXIT_WAIT_S) {
                if (g_rank > 0 && g_held[0]) fprintf(stderr, "qscope: rank %d: %s\n", g_rank, g_held);
                fflush(NULL);
                M.Abort(M.world, rc);
                _exit(rc);
            }
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    watchdog_stop();
    qs_par_finalize();
    return rc;
}

/* ---- sums in a fixed order (see par.h) ---- */

#define SUM_SEG ((size_t)1 << 22)   /* elements per collective: bounds the scratch and MPI's int counts */

static void add_f32(void *d, const void *s, size_t n)
{
    float *a = d;
    const float *b = s;
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}

static void add_f64(void *d, const void *s, size_t n)
{
    double *a = d;
    const double *b = s;
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}

static int sum_fixed(void *x, size_t n, size_t es, void (*add)(void *, const void *, size_t), qs_err *e)
{
    if (!g_mpi || g_size <= 1 || n == 0) return 0;
    const int N = g_size;
    size_t seg = n < SUM_SEG ? n : SUM_SEG, need = (seg / (size_t)N + 1) * (size_t)N * es;
    if (need > g_sum_cap) {
        free(g_sum_tmp);
        g_sum_cap = 0;
        if (!(g_sum_tmp = malloc(need))) return qs_fail(e, "out of memory for the gradients' sum");
        g_sum_cap = need;
    }
    char *tmp = g_sum_tmp;
    int *cnt = malloc(4 * (size_t)N * sizeof *cnt);
    if (!cnt) return qs_fail(e, "out of memory for the gradients' sum");
    int *dsp = cnt + N, *rcnt = dsp + N, *rdsp = rcnt + N;
    g_watch = 1;
    for (size_t off = 0; off < n; off += seg) {
        size_t len = n - off < seg ? n - off : seg;
        char *base = (char *)x + off * es;
        for (int p = 0; p < N; p++) {   /* part p of the segment: [len*p/N, len*(p+1)/N) */
            size_t lo = len * (size_t)p / (size_t)N, hi = len * (size_t)(p + 1) / (size_t)N;
            cnt[p] = (int)((hi - lo) * es);
            dsp[p] = (int)(lo * es);
        }
        size_t mine = (size_t)cnt[g_rank] / es;
        for (int q = 0; q < N; q++) {
            rcnt[q] = (int)(mine * es);
            rdsp[q] = (int)((size_t)q * mine * es);
        }
        mpi_check(M.Alltoallv(base, cnt, dsp, M.byte, tmp, rcnt, rdsp, M.byte, M.world), "all-to-all");
        for (int q = 1; q < N; q++) add(tmp, tmp + (size_t)q * mine * es, mine);   /* rank order */
        mpi_check(M.Allgatherv(tmp, (int)(mine * es), M.byte, base, cnt, dsp, M.byte, M.world), "all-gather");
    }
    g_watch = 0;
    free(cnt);
    return 0;
}

int qs_par_sum_f32(float *x, size_t n, qs_err *e) { return sum_fixed(x, n, sizeof *x, add_f32, e); }
int qs_par_sum_f64(double *x, size_t n, qs_err *e) { return sum_fixed(x, n, sizeof *x, add_f64, e); }

void qs_par_training(int on)
{
    if (g_mpi) g_phase = on ? 4 : 0;
}

static void send_bytes(const void *b, size_t len, int dest, int tag)
{
    const uint8_t *p = b;
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t k = len - off < CHUNK ? len - off : CHUNK;
        mpi_check(M.Send(p + off, (int)k, M.byte, dest, tag, M.world), "send");
    }
}

static void recv_bytes(void *b, size_t len, int src, int tag)
{
    uint8_t *p = b;
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t k = len - off < CHUNK ? len - off : CHUNK;
        mpi_check(M.Recv(p + off, (int)k, M.byte, src, tag, M.world, MPI_STATUS_IGNORE), "receive");
    }
}

static void send_msg(int kind, uint64_t unit, const void *b, size_t len)
{
    msg_hdr h = {unit, len, kind, 0};
    mpi_check(M.Send(&h, (int)sizeof h, M.byte, 0, T_HDR, M.world), "send");
    send_bytes(b, len, 0, T_DATA);
}

/* ---- rank 0's store of received results ---- */

#define QS_PAR_MEM ((size_t)64 << 20)

typedef struct { uint8_t *b; size_t len; long long off; int have; } result_slot;

typedef struct {
    size_t n;
    const double *cost;
    const int *owner;
    result_slot *res;
    size_t mem;
    FILE *spill;
    long long spill_end;
    pthread_mutex_t mu;       /* res, mem, spill, err, failed */
    int failed, final_sent;
    qs_err err;
    progress *pg;
} run0;

static void fail0(run0 *R, const char *msg)
{
    pthread_mutex_lock(&R->mu);
    if (!R->failed) {
        R->failed = 1;
        snprintf(R->err.msg, sizeof R->err.msg, "%s", msg);
    }
    pthread_mutex_unlock(&R->mu);
}

static int failed0(run0 *R)
{
    pthread_mutex_lock(&R->mu);
    int f = R->failed;
    pthread_mutex_unlock(&R->mu);
    return f;
}

/* Keep unit i's bytes (taking b); -1 when neither memory nor the scratch file can hold them. */
static int keep0(run0 *R, size_t i, uint8_t *b, size_t len)
{
    pthread_mutex_lock(&R->mu);
    result_slot *s = &R->res[i];
    int rc = 0;
    s->len = len;
    s->have = 1;
    s->off = -1;
    if (R->mem + len <= QS_PAR_MEM) {
        s->b = b;
        R->mem += len;
        b = NULL;
    } else {
        if (!R->spill) {
            const char *td = getenv("TMPDIR");
            char path[4096];
            snprintf(path, sizeof path, "%s/qscope-par-XXXXXX", td && *td ? td : P_tmpdir);
            int fd = mkstemp(path);
            if (fd >= 0) {
                unlink(path);
                R->spill = fdopen(fd, "w+b");
                if (!R->spill) close(fd);
            }
        }
        if (!R->spill || fseeko(R->spill, R->spill_end, SEEK_SET) || (len && fwrite(b, 1, len, R->spill) != len)) {
            rc = -1;
            s->have = 0;
        } else {
            s->off = R->spill_end;
            R->spill_end += (long long)len;
        }
    }
    pthread_mutex_unlock(&R->mu);
    free(b);
    return rc;
}

static void send_final_all(run0 *R, int rc, const char *msg)
{
    if (R->final_sent) return;
    R->final_sent = 1;
    msg_final f = {rc, 0, ""};
    snprintf(f.msg, sizeof f.msg, "%s", msg ? msg : "");
    for (int r = 1; r < g_size; r++) mpi_check(M.Send(&f, (int)sizeof f, M.byte, r, T_FINAL, M.world), "send");
}

static void *receiver(void *arg)
{
    run0 *R = arg;
    int done = 0;
    while (done < g_size - 1) {
        if (!R->final_sent && failed0(R)) {
            pthread_mutex_lock(&R->mu);
            qs_err m = R->err;
            pthread_mutex_unlock(&R->mu);
            send_final_all(R, -1, m.msg);
        }
        int flag = 0;
        MPI_Status st;
        mpi_check(M.Iprobe(MPI_ANY_SOURCE, T_HDR, M.world, &flag, &st), "probe");
        if (!flag) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        int src = st.MPI_SOURCE;
        msg_hdr h;
        mpi_check(M.Recv(&h, (int)sizeof h, M.byte, src, T_HDR, M.world, MPI_STATUS_IGNORE), "receive");
        uint8_t *b = h.len ? malloc(h.len) : NULL;
        if (h.len && !b) {   /* the bytes must still be taken off the wire */
            uint8_t *sink = malloc(CHUNK < h.len ? CHUNK : h.len);
            for (uint64_t off = 0; sink && off < h.len; off += CHUNK)
                recv_bytes(sink, h.len - off < CHUNK ? h.len - off : CHUNK, src, T_DATA);
            free(sink);
            if (!sink) mpi_check(MPI_ERR_NO_MEM, "receive");
            fail0(R, "out of memory for a rank's result");
            continue;
        }
        recv_bytes(b, h.len, src, T_DATA);
        char m[sizeof R->err.msg];
        if (h.kind == K_DONE) {
            done++;
            free(b);
        } else if (h.kind == K_FAIL) {
            snprintf(m, sizeof m, "%.*s", (int)(h.len < sizeof m - 1 ? h.len : sizeof m - 1), b ? (char *)b : "");
            free(b);
            fail0(R, m);
        } else if (h.kind != K_RESULT || h.unit >= R->n || R->owner[h.unit] != src || R->res[h.unit].have) {
            free(b);
            snprintf(m, sizeof m, "rank %d sent a result qscope did not expect (unit %llu)", src, (unsigned long long)h.unit);
            fail0(R, m);
        } else if (keep0(R, (size_t)h.unit, b, h.len)) {
            fail0(R, "no room to keep the ranks' results (memory and the scratch file in $TMPDIR)");
        } else {
            progress_add(R->pg, R->cost[h.unit]);
        }
    }
    return NULL;
}

static int run_root(size_t n, const double *cost, const int *owner, qs_par_unit_fn fn, qs_par_collect_fn collect,
                    void *ctx, progress *pg, qs_err *e)
{
    run0 R = {.n = n, .cost = cost, .owner = owner, .pg = pg};
    g_watch = 1;   /* every rank owes results until the receiver is done */
    pthread_mutex_init(&R.mu, NULL);
    R.res = calloc(n ? n : 1, sizeof *R.res);
    if (!R.res) {
        fail0(&R, "out of memory");
        send_final_all(&R, -1, R.err.msg);   /* then still drain every worker's messages */
    }
    pthread_t th;
    int have_th = pthread_create(&th, NULL, receiver, &R) == 0;
    if (!have_th) fail0(&R, "cannot start the thread that receives the ranks' results");   /* drained below */
    /* rank 0's own units, largest first like the schedule */
    size_t *mine = malloc((n ? n : 1) * sizeof *mine), nm = 0;
    if (!mine) fail0(&R, "out of memory");
    for (size_t i = 0; mine && i < n; i++) if (owner[i] == 0) mine[nm++] = i;
    if (mine) qsort_r(mine, nm, sizeof *mine, by_cost_desc, (void *)cost);
    for (size_t k = 0; k < nm && !failed0(&R); k++) {
        size_t i = mine[k];
        uint8_t *b = NULL;
        size_t len = 0;
        qs_err ue = {{0}};
        if (fn(i, ctx, &b, &len, &ue)) {
            free(b);
            fail0(&R, ue.msg[0] ? ue.msg : "a unit of work failed");
            break;
        }
        if (keep0(&R, i, b, len)) { fail0(&R, "no room to keep the results (memory and the scratch file in $TMPDIR)"); break; }
        progress_add(pg, cost[i]);
    }
    free(mine);
    if (have_th) pthread_join(th, NULL);
    else receiver(&R);   /* the workers' messages must still be taken: they stop at the FINAL it sends */
    g_watch = 0;
    progress_end(pg);
    int rc = 0;
    if (R.failed) {
        send_final_all(&R, -1, R.err.msg);
        *e = R.err;
        rc = -1;
    } else {
        /* every rank succeeded: store, in unit order */
        g_phase = 2;
        g_stored = 1;
        uint8_t *buf = NULL;
        size_t cap = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            result_slot *s = &R.res[i];
            const uint8_t *b = s->b;
            if (!s->have) { rc = qs_fail(e, "unit %zu of the job has no result", i); break; }
            if (s->off >= 0) {
                if (s->len > cap) {
                    uint8_t *nb = realloc(buf, s->len);
                    if (!nb) { rc = qs_fail(e, "out of memory"); break; }
                    buf = nb;
                    cap = s->len;
                }
                if (fseeko(R.spill, s->off, SEEK_SET) || fread(buf, 1, s->len, R.spill) != s->len) {
                    rc = qs_fail(e, "cannot read back a result from the scratch file");
                    break;
                }
                b = buf;
            }
            rc = collect(i, b, s->len, ctx, e);
            free(s->b);
            s->b = NULL;
        }
        free(buf);
        send_final_all(&R, rc, rc ? e->msg : NULL);
    }
    for (size_t i = 0; R.res && i < n; i++) free(R.res[i].b);
    free(R.res);
    if (R.spill) fclose(R.spill);
    pthread_mutex_destroy(&R.mu);
    return rc;
}

static int run_worker(size_t n, const double *cost, const int *owner, qs_par_unit_fn fn, void *ctx, qs_err *e)
{
    size_t *mine = malloc((n ? n : 1) * sizeof *mine), nm = 0;
    int stopped = 0;
    if (!mine) {
        static const char oom[] = "out of memory";
        send_msg(K_FAIL, 0, oom, sizeof oom - 1);
        stopped = 1;
    }
    for (size_t i = 0; mine && i < n; i++) if (owner[i] == g_rank) mine[nm++] = i;
    if (mine) qsort_r(mine, nm, sizeof *mine, by_cost_desc, (void *)cost);
    for (size_t k = 0; k < nm && !stopped; k++) {
        int flag = 0;
        mpi_check(M.Iprobe(0, T_FINAL, M.world, &flag, MPI_STATUS_IGNORE), "probe");
        if (flag) break;   /* rank 0 stopped the job; its final word follows below */
        size_t i = mine[k];
        uint8_t *b = NULL;
        size_t len = 0;
        qs_err ue = {{0}};
        if (fn(i, ctx, &b, &len, &ue)) {
            char m[sizeof ue.msg + 16];
            int ml = snprintf(m, sizeof m, "%s", ue.msg[0] ? ue.msg : "a unit of work failed");
            send_msg(K_FAIL, i, m, (size_t)ml);
            stopped = 1;
        } else {
            send_msg(K_RESULT, i, b, len);
        }
        free(b);
    }
    free(mine);
    send_msg(K_DONE, 0, NULL, 0);
    msg_final f;
    mpi_check(M.Recv(&f, (int)sizeof f, M.byte, 0, T_FINAL, M.world, MPI_STATUS_IGNORE), "receive");
    f.msg[sizeof f.msg - 1] = 0;
    if (f.rc) {
        snprintf(e->msg, sizeof e->msg, "%s", f.msg);
        return -1;
    }
    return 0;
}

int qs_par_run(size_t n, const double *cost, qs_par_unit_fn fn, qs_par_collect_fn collect, void *ctx,
               const char *what, qs_err *e)
{
    progress pg = {.what = g_rank == 0 ? what : NULL, .tty = g_rank == 0 && qs_par_isatty(STDERR_FILENO), .nranks = g_size,
                   .n = n, .last_t = -1};
    pthread_mutex_init(&pg.mu, NULL);
    for (size_t i = 0; cost && i < n; i++) pg.total += cost[i] >= 0 ? cost[i] : 0;
    int rc;
    if (g_size == 1 || !g_mpi) {
        rc = run_local(n, cost, fn, collect, ctx, &pg, e);
        progress_end(&pg);
    } else {
        int *owner = malloc((n ? n : 1) * sizeof *owner);
        double *c = malloc((n ? n : 1) * sizeof *c);
        if (!owner || !c) {   /* a rank that cannot even schedule cannot take part: end the job */
            fprintf(stderr, "qscope: rank %d: out of memory\n", g_rank);
            M.Abort(M.world, 1);
            _exit(1);
        }
        for (size_t i = 0; i < n; i++) c[i] = cost ? cost[i] : 1;
        qs_par_assign(n, c, g_size, owner);
        g_phase = 1;
        rc = g_rank == 0 ? run_root(n, c, owner, fn, collect, ctx, &pg, e) : run_worker(n, c, owner, fn, ctx, e);
        g_phase = 0;
        free(owner);
        free(c);
    }
    pthread_mutex_destroy(&pg.mu);
    return rc;
}

#endif
