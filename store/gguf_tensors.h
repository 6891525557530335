/*
** The tensor directory of a GGUF file alone (names, ggml type ids, shapes, absolute data offsets),
** whatever the types: for callers that read blocks themselves (`bench quantize` compares llama-quantize's
** blocks with qscope's).  Bounded: counts checked against the bytes left before anything is allocated;
** the data of a type this reader does not size is not checked (the caller checks what it reads).
*/
#ifndef QS_GGUF_TENSORS_H
#define QS_GGUF_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/qs_err.h"

typedef struct qs_gguf_tensor {
    char *name;
    uint32_t type;            /* ggml_type: 0 F32, 1 F16, 2 Q4_0, ... */
    int nd;
    uint64_t ne[4];           /* ne[0]: the row length */
    uint64_t nel;             /* elements */
    uint64_t off;             /* absolute offset of the data in the file */
} qs_gguf_tensor;

/* -1 with "what (at byte N)" in e. */
int qs_gguf_tensors(const uint8_t *b, size_t len, qs_gguf_tensor **t, size_t *n, qs_err *e);
void qs_gguf_tensors_free(qs_gguf_tensor *t, size_t n);

#endif
