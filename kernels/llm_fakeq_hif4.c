/* The fused training-operand kernel of the hif4 family (llm_fakeq_fast.h).  Not written yet: takes nothing. */
#include "llm_fakeq_fast.h"

int qs_fq_hif4_ok(const qs_apply *a, int axis, int rht, int counting)
{
    (void)a; (void)axis; (void)rht; (void)counting;
    return 0;
}

int qs_fq_hif4(const qs_fq_task *t, qs_err *e)
{
    (void)t;
    return qs_fail(e, "internal: the hif4 fused kernel takes no operand");
}
