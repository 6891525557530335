/*
** libFuzzer target for the safetensors reader (store/parse_safetensors.c); the checks are fuzz_container.h's.
*/
#include "fuzz_container.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_parse(qs_parse_safetensors, "safetensors", data, size);
    return 0;
}
