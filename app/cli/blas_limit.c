/*
** OpenBLAS under an address-space limit (`ulimit -v`).  OpenBLAS maps a 128 MiB work buffer for each
** thread that computes (its worker threads map theirs as the library loads) and, when that mmap
** fails, retries it forever: under a limit of 100-190 MB even `qscope --version` hung, and lower down
** a failed pthread_create made OpenBLAS raise SIGINT.  Two guards, both linked into the executable
** itself (never into the libraries the tests link):
**  - before any library's constructor runs (.preinit_array), OPENBLAS_NUM_THREADS is capped to the
**    threads whose buffers fit in half of what the limit leaves (by starting again with it set), so
**    the workers started at load fit;
**  - blas_memory_alloc, which OpenBLAS calls through its PLT, is wrapped: when it would map a new
**    buffer that does not fit, qscope says so in one line and exits 1 instead of spinning.
** Without a limit neither changes anything.
*/
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* BUFFER_SIZE of OpenBLAS on x86-64 (32 << 22), plus its page of alignment and some slack. */
#define BLAS_BUF ((size_t)128 << 20)
#define BLAS_BUF_PROBE (BLAS_BUF + ((size_t)64 << 10))

void *blas_memory_alloc(int procpos);
void blas_memory_free(void *area);

static void *(*real_alloc)(int);
static void (*real_free)(void *);
static size_t as_limit;                 /* RLIMIT_AS in bytes, 0 when unlimited */
static int mapped, in_use;              /* OpenBLAS's buffers: mapped so far, handed out now */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t vm_size(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* getenv does not work yet (libc has not taken envp). */
static const char *env_get(char **envp, const char *name)
{
    size_t n = strlen(name);
    for (; *envp; envp++)
        if (!strncmp(*envp, name, n) && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

/* The thread count OpenBLAS is about to take: its variables in its order, else the usable cores. */
static int wanted_threads(char **envp)
{
    static const char *const vars[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = env_get(envp, vars[i]);
        int n = v ? atoi(v) : 0;
        if (n > 0) return n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Before the libraries' constructors libc has not yet taken its environment (getenv sees nothing,
** a setenv would be lost), so a cap is passed the only way OpenBLAS reads it: a new start with the
** variable set (about 10 ms, under a limit only). */
static void blas_limit_preinit(int argc, char **argv, char **envp)
{
    (void)argc;
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
    as_limit = r.rlim_cur;
    size_t stack = 8u << 20;            /* a worker's stack (glibc takes RLIMIT_STACK) */
    if (getrlimit(RLIMIT_STACK, &r) == 0 && r.rlim_cur != RLIM_INFINITY) stack = r.rlim_cur;
    size_t used = vm_size(), spare = as_limit > used ? as_limit - used : 0;
    int want = wanted_threads(envp);
    size_t fit = spare / 2 / (BLAS_BUF_PROBE + stack);
    if ((size_t)want <= fit || env_get(envp, "QS_BLAS_THREADS_CAPPED")) return;
    size_t n = 0;
    while (envp[n]) n++;
    char **env = malloc((n + 3) * sizeof *env), var[48];
    if (!env) return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], "OPENBLAS_NUM_THREADS=", 21) != 0) env[k++] = envp[i];
    snprintf(var, sizeof var, "OPENBLAS_NUM_THREADS=%d", fit < 1 ? 1 : (int)fit);
    env[k++] = var;
    env[k++] = "QS_BLAS_THREADS_CAPPED=1";   /* never loop */
    env[k] = NULL;
    execve("/proc/self/exe", argv, env);
    free(env);                          /* exec failed: go on; the wrapper below still guards */
}

/* Runs before every shared library's constructor, OpenBLAS's gotoblas_init included. */
__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **, char **) =
    blas_limit_preinit;

static void resolve_once(void)
{
    real_alloc = (void *(*)(int))dlsym(RTLD_NEXT, "blas_memory_alloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "blas_memory_free");
}

/* OpenBLAS's threads call in concurrently: a lazy lookup without a once-guard let one thread see
** real_alloc set and real_free still NULL, and exit with the message below (seen once in 100 runs). */
static int resolve(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, resolve_once);
    if (real_alloc && real_free) return 0;
    static const char msg[] = "qscope: OpenBLAS's blas_memory_alloc not found\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

/* Under a limit: would a new buffer fit?  (A mapping of that size, given back at once; OpenBLAS
** maps its own right after, under the same lock for the calls that go through here.) */
static int buffer_fits(void)
{
    void *p = mmap(NULL, BLAS_BUF_PROBE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return 0;
    munmap(p, BLAS_BUF_PROBE);
    return 1;
}

void *blas_memory_alloc(int procpos)
{
    resolve();
    if (!as_limit) return real_alloc(procpos);
    pthread_mutex_lock(&lock);
    /* OpenBLAS hands out a free mapped buffer before it maps another, so it maps only when all are
    ** in use. */
    if (in_use == mapped && !buffer_fits()) {
        char msg[200];
        int n = snprintf(msg, sizeof msg,
                         "qscope: not enough memory: OpenBLAS needs a %zu MiB work buffer and `ulimit -v` "
                         "(%zu MiB) leaves no room for it\n",
                         BLAS_BUF >> 20, as_limit >> 20);
        if (write(STDERR_FILENO, msg, (size_t)n) < 0) _exit(1);
        _exit(1);                       /* not exit(): OpenBLAS's destructor would join this thread */
    }
    void *p = real_alloc(procpos);
    if (++in_use > mapped) mapped = in_use;
    pthread_mutex_unlock(&lock);
    return p;
}

void blas_memory_free(void *area)
{
    resolve();
    if (!as_limit) { real_free(area); return; }
    pthread_mutex_lock(&lock);
    real_free(area);
    if (in_use > 0) in_use--;
    pthread_mutex_unlock(&lock);
}
