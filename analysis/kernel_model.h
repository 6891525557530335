/*
** Latency and HBM-traffic model of MSD versus dequantize-then-GEMM (RECONSTRUCTED: the paper's
** closed forms were not available; spec msd-attention.md §A.5 states the project's model, reproduced
** here term by term), parameterised by a hardware profile.
**
**   dequant, pipelined:  T = max(N·K/R_vec, 2MNK/P_bf16, bytes_deq/B)
**   dequant, stalled:    T = N·K/R_vec + max(2MNK/P_bf16, bytes_deq/B)   (Cube waits for tiles)
**   MSD:                 T = k·M·K/R_vec + max(2·kM·N·K/P_low, bytes_msd/B) + M·N/R_vec
**   bytes_deq = N·K·(b_w + 2 + 2) + 2·M·K + 2·M·N     (read int8, write bf16, Cube reads bf16)
**   bytes_msd = N·K·b_w + 2·M·K + k·M·K + 4·k·M·N + 2·M·N (weights once, decomposed x, INT32 partials)
** KV ledger per cached element: dequant 1 + 2 + 2 = 5 B; MSD with one stacked GEMM reads the INT8 tile
** once (1 B); with k separate component GEMMs k B — the 2-pass figure 5/2 = 2.5× is the paper's "up to".
*/
#ifndef QS_KERNEL_MODEL_H
#define QS_KERNEL_MODEL_H

#include <jansson.h>

typedef struct qs_hw {
    char name[48];
    double p_bf16;     /* matrix-unit FLOP/s at BF16 (FP32 SGEMM for the CPU) */
    double p_low;      /* matrix-unit OP/s at INT8 / the MSD component type */
    double r_vec;      /* vector elements/s of a dequant or decompose op */
    double bw;         /* HBM / DRAM bytes/s */
    char note[160];
} qs_hw;

/* Built-in profiles "ascend910", "h100" (illustrative public-spec figures), "cpu" (measured now:
** SGEMM, a dequant loop and a copy bandwidth, with `threads` threads). */
int qs_hw_profile(const char *name, int threads, qs_hw *hw);
const char *qs_hw_names(void);

/* Model rows for decode shapes (M list × (N,K) list) and the KV ledger; k passes, b_w bytes per weight. */
json_t *qs_model_table(const qs_hw *hw, int k, double bw_elem);
json_t *qs_model_kv_ledger(int k);
double qs_measure_sgemm_gflops(int n, int threads, int reps);
double qs_measure_bandwidth(int threads);

#endif
