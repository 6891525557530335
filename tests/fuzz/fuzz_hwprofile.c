/*
** libFuzzer target for the hardware-profile parser of `qscope msd --model custom:...`
** (analysis/kernel_model.c): any text after "custom:" either fails or yields a profile with
** positive finite parameters, and the model table built from it is finite.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../analysis/kernel_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *s = malloc(size + 8);
    if (!s) return 0;
    memcpy(s, "custom:", 7);
    memcpy(s + 7, data, size);
    s[7 + size] = 0;
    qs_hw hw;
    if (qs_hw_profile(s, 1, &hw) == 0) {
        if (!(hw.p_bf16 > 0 && hw.p_low > 0 && hw.r_vec > 0 && hw.bw > 0)) abort();
        if (!isfinite(hw.p_bf16) || !isfinite(hw.p_low) || !isfinite(hw.r_vec) || !isfinite(hw.bw)) abort();
        json_t *t = qs_model_table(&hw, 2, 1.0);
        if (!t || json_array_size(t) == 0) abort();
        json_decref(t);
    }
    free(s);
    return 0;
}
