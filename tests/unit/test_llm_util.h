/*
** A format by name for the LLM unit tests: the registry's format, every option at its default, blocks
** along rows (axis 1, as the forward pass rounds activations and weights).
*/
#ifndef QS_TEST_LLM_UTIL_H
#define QS_TEST_LLM_UTIL_H
#include <string.h>

#include "test_util.h"
#include "../../kernels/format.h"
#include "../../kernels/format_apply.h"

static inline qs_apply tu_apply(const char *name)
{
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.f = qs_format_find(name);
    assert_non_null(a.f);
    a.axis = 1;
    return a;
}
#endif
