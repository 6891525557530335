/*
** The claims table: the groups of claims_*.c in a fixed order.
*/
#include "claims.h"

typedef struct { const qs_claim *c; const size_t *n; } group;

static const group kGroups[] = {
    {qs_claims_formats, &qs_claims_formats_n},
    {qs_claims_kernels, &qs_claims_kernels_n},
    {qs_claims_rl, &qs_claims_rl_n},
    {qs_claims_train, &qs_claims_train_n},
    {qs_claims_grpo, &qs_claims_grpo_n},
    {qs_claims_lopt, &qs_claims_lopt_n},
};

#define NGROUPS (sizeof kGroups / sizeof kGroups[0])

size_t qs_claim_count(void)
{
    size_t n = 0;
    for (size_t g = 0; g < NGROUPS; g++) n += *kGroups[g].n;
    return n;
}

const qs_claim *qs_claim_at(size_t i)
{
    for (size_t g = 0; g < NGROUPS; g++) {
        if (i < *kGroups[g].n) return &kGroups[g].c[i];
        i -= *kGroups[g].n;
    }
    return NULL;
}

const char *qs_verdict_name(qs_verdict v)
{
    switch (v) {
    case QS_VERDICT_REPRODUCED: return "reproduced";
    case QS_VERDICT_DIFFERS: return "differs";
    case QS_VERDICT_NOT_CPU: return "not on CPU";
    case QS_VERDICT_MODEL: return "model";
    case QS_VERDICT_INCONCLUSIVE: return "inconclusive";
    }
    return "?";
}
