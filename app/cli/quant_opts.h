/*
** Format options on the command line, shared by `quant`, `explain` and (later) `analyze`:
**   -f FORMAT --round R --scale-rule S[=Q] --block N --axis 0|1 --gran G --sat --seed S
**   --nvfp4 te|torchao --m2x em|es, and the library variants --floor-log2f --zero-positive
**   --flush-subnormal-blocks --nonfinite-block nan|te --zero-block-scale HEX (docs/formats.md)
*/
#ifndef QS_QUANT_OPTS_H
#define QS_QUANT_OPTS_H

#include <getopt.h>

#include "../../analysis/analyze_key.h"
#include "../../kernels/format_apply.h"

/* long options for getopt_long; values >= 0x1000 are handled by qs_quant_opt() */
#define QS_QUANT_LONGOPTS \
    {"format", required_argument, 0, 'f'}, {"round", required_argument, 0, 0x1001}, \
    {"scale-rule", required_argument, 0, 0x1002}, {"block", required_argument, 0, 0x1003}, \
    {"axis", required_argument, 0, 0x1004}, {"gran", required_argument, 0, 0x1005}, \
    {"sat", no_argument, 0, 0x1006}, {"seed", required_argument, 0, 0x1007}, \
    {"nvfp4", required_argument, 0, 0x1008}, {"m2x", required_argument, 0, 0x1009}, \
    {"floor-log2f", no_argument, 0, 0x100A}, {"zero-positive", no_argument, 0, 0x100B}, \
    {"flush-subnormal-blocks", no_argument, 0, 0x100C}, {"nonfinite-block", required_argument, 0, 0x100D}, \
    {"zero-block-scale", required_argument, 0, 0x100E}, {"scale", required_argument, 0, 0x100F}

/* Handle one option; returns 1 if it was a format option, 0 if not, -1 on a bad value (message
** printed as a usage error for command `cmd`). */
int qs_quant_opt(const char *cmd, int ch, const char *arg, qs_apply *a);
/* After parsing: a format must have been chosen; validates the combination. 0 ok, else exit code. */
int qs_quant_opts_done(const char *cmd, qs_apply *a);

#define QS_QUANT_OPTS_HELP \
    "  -f, --format F      number format (see `qscope formats`)\n" \
    "  --round R           element rounding: rne, ta, hr (hif8), sr (stochastic, seeded), rtz,\n" \
    "                      tz (nearest, ties toward zero: ggml's CPU rule; MX and element casts),\n" \
    "                      ggml (llama.cpp's types: their own rules; q8_0/q8_1 also rne, ggml-cpu x86)\n" \
    "  --scale-rule S      MX block scale: floor (OCP, default), ceil, even, rceil, uos[=QMAX]\n" \
    "  --block N           block size (default: the format's; fixed for llama.cpp's types)\n" \
    "  --axis 0|1          2-D tensors: blocks along the last (1, default) or first (0) dimension\n" \
    "  --gran G            int8/int4: tensor (default), row, col, or block (with --block N)\n" \
    "  --sat               plain casts: saturate instead of overflowing to NaN/Inf\n" \
    "  --seed S            seed for stochastic rounding (default 0)\n" \
    "  --nvfp4 te|torchao  NVFP4 arithmetic order (default te)\n" \
    "  --m2x em|es         M2XFP mode (default em)\n" \
    "  --floor-log2f       MX floor scale from libm floorf(log2f(amax)), not the exponent bits\n" \
    "                      (ggml CPU, microxcaling PyTorch)\n" \
    "  --zero-positive     every zero result is +0 (ggml, microxcaling C++, TE; MX and casts)\n" \
    "  --flush-subnormal-blocks  MX: a block whose amax is an FP32 subnormal becomes zeros\n" \
    "                      (microxcaling mx_flush_fp32_subnorms)\n" \
    "  --nonfinite-block nan|te  MX block holding Inf: scale 0xFF, all NaN (default) or TE's\n" \
    "                      scale 0xFE, saturating (a NaN still gives 0xFF)\n" \
    "  --scale none|tensor|row|col  element casts: one FP32 scale per tensor/row/column maps its\n" \
    "                      absmax onto the format's scale target (hif8 15, others max_finite;\n" \
    "                      docs/formats.md), Q(x*s)/s as `llm` does; default none (raw cast)\n" \
    "  --zero-block-scale HEX  MX: E8M0 scale code of an all-zero block (default 00, 7f under uos;\n" \
    "                      microxcaling INT8 01)\n"

/* Parse a format list "F1,F2:key=value:key,..." into apps[] (at most cap).  Each entry starts from
** `base` (the command-wide options) with its own format; per-format "key=value" (or a bare "key"
** for flags) use the long option names above, e.g. "mxfp4:scale-rule=rceil:block=16".
** Returns the count, or -1 after printing a usage error. */
int qs_quant_parse_list(const char *cmd, const char *list, const qs_apply *base, qs_apply *apps, int cap);
/* The canonical label of an entry, used by every row, legend, title and report: the format name
** plus each option that differs from the format's default ("fp8_e4m3:sat", "mxfp4:rceil:b16",
** "nvfp4:torchao"); the same options always give the same label. */
void qs_quant_label(const qs_apply *a, const char *spec, char *buf, size_t cap);

#endif
