/* Shared declarations of the kernel commands (msd, attn, resq, bench kernels). */
#ifndef QS_KERNEL_CLI_H
#define QS_KERNEL_CLI_H

#include <stdint.h>

#include "cli.h"

#define QS_KX_MAX_K 133000

int qs_cmd_msd(qs_cli *cli, int argc, char **argv);
int qs_cmd_attn(qs_cli *cli, int argc, char **argv);
int qs_cmd_resq(qs_cli *cli, int argc, char **argv);
int qs_bench_kernels(qs_cli *cli, int quick, int json, int score);

#endif
