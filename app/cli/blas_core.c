/*
** OpenBLAS core selection.  Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) does not recognise newer Xeons
** (Sapphire Rapids reports only "Intel(R) Xeon(R) Processor") and falls back to its SSE3 "Prescott"
** kernels: 3-5x slower SGEMM (measured 11 vs 57 GFLOP/s, BENCHMARKS.md).  The core is chosen when the
** library loads, from OPENBLAS_CORETYPE, so the only fix from inside the program is to set it and
** re-execute once.  A core the user sets is always kept.  Commands that never call BLAS skip the
** second start (about 7 ms): `quant` of a 64 MB file is ~60 ms in all.
*/
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../../kernels/blas_threads.h"

char *openblas_get_corename(void);
int blas_thread_shutdown_(void);

/* The commands that never reach OpenBLAS (kernels/llm, msd, attn, amla, resq and the kernel
** experiments do); any other command, or none (the workbench), gets the fixed core. */
static int blas_free_command(int argc, char **argv)
{
    static const char *const cmds[] = {"import", "ls", "show", "rm", "gen", "quant", "formats", "explain",
                                       "analyze", "info", "check", "schema", "import-log", "runs", "ais"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--db")) { i++; continue; }
        if (a[0] == '-') continue;
        for (size_t k = 0; k < sizeof cmds / sizeof *cmds; k++)
            if (!strcmp(a, cmds[k])) return 1;
        return 0;
    }
    return 0;
}

void qs_blas_core_fix(int argc, char **argv)
{
    qs_blas_threads();   /* OpenBLAS's thread count, read once here (kernels/blas_threads.h) */
    if (blas_free_command(argc, argv)) {
        /* OpenBLAS starts its worker threads when it loads, and they spin in sched_yield for a while
        ** (a third of a core during a 50 ms quant); stop them (a later BLAS call restarts them). */
        blas_thread_shutdown_();
        return;
    }
    if (getenv("OPENBLAS_CORETYPE") || getenv("QS_BLAS_CORE_FIXED")) return;
    const char *core = openblas_get_corename();
    if (!core || strcmp(core, "Prescott") != 0) return;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    setenv("OPENBLAS_CORETYPE", __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell", 1);
    setenv("QS_BLAS_CORE_FIXED", "1", 1);   /* never loop */
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");          /* exec failed: carry on with the slow core */
}
