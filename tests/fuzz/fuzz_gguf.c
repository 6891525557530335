/*
** libFuzzer target for the GGUF reader (store/parse_gguf.c); the checks are fuzz_container.h's.
*/
#include "fuzz_container.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_parse(qs_parse_gguf, "gguf", data, size);
    return 0;
}
