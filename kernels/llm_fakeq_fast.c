/* The fused training-operand kernels' dispatch (llm_fakeq_fast.h): the first family that takes it. */
#include "llm_fakeq_fast.h"

#include <stdlib.h>

/* QS_FAKEQ_FAST=0 turns every family kernel off (the generic path: for comparisons and tests). */
static int enabled(void)
{
    const char *s = getenv("QS_FAKEQ_FAST");
    return !(s && s[0] == '0' && !s[1]);
}

int qs_llm_fakeq_fast_ok(const qs_apply *a, int axis, int rht, int counting)
{
    if (!enabled()) return 0;
    return qs_fq_mx_ok(a, axis, rht, counting) || qs_fq_nvfp4_ok(a, axis, rht, counting) ||
           qs_fq_hif4_ok(a, axis, rht, counting);
}

int qs_llm_fakeq_fast(const qs_fq_task *t, qs_err *e)
{
    const int counting = t->cnt != NULL;
    if (qs_fq_mx_ok(t->a, t->axis, t->rht, counting)) return qs_fq_mx(t, e);
    if (qs_fq_nvfp4_ok(t->a, t->axis, t->rht, counting)) return qs_fq_nvfp4(t, e);
    if (qs_fq_hif4_ok(t->a, t->axis, t->rht, counting)) return qs_fq_hif4(t, e);
    return qs_fail(e, "internal: no fused kernel for format %s", t->a->f->name);
}
