/*
** OpenBLAS core selection.  Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) does not recognise newer Xeons
** (Sapphire Rapids reports only "Intel(R) Xeon(R) Processor") and falls back to its SSE3 "Prescott"
** kernels: 3-5x slower SGEMM (measured 11 vs 57 GFLOP/s, BENCHMARKS.md).  The core is chosen when the
** library loads, from OPENBLAS_CORETYPE, so the only fix from inside the program is to set it and
** re-execute once.  A core the user sets is always kept.
*/
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

char *openblas_get_corename(void);

void qs_blas_core_fix(char **argv)
{
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
