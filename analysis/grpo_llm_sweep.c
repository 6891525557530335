/* Sweeps of `rl grpo` runs (grpo_llm_sweep.h). */
#include "grpo_llm_sweep.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXL 16

typedef struct {
    char item[MAXL][96];
    int n;
} list;

static int add(list *l, const char *key, const char *v, size_t len, qs_err *e)
{
    if (len == 0) return qs_fail(e, "--sweep: an empty item in %s", key);
    if (len >= sizeof l->item[0]) return qs_fail(e, "--sweep: an item of %s is too long", key);
    if (l->n == MAXL) return qs_fail(e, "--sweep: more than %d items in %s", MAXL, key);
    memcpy(l->item[l->n], v, len);
    l->item[l->n][len] = 0;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->item[i], l->item[l->n])) return qs_fail(e, "--sweep: '%s' twice in %s", l->item[i], key);
    l->n++;
    return 0;
}

/* items of v (up to end) separated by any character of seps */
static int split(list *l, const char *key, const char *v, const char *end, const char *seps, qs_err *e)
{
    l->n = 0;
    while (v <= end) {
        const char *p = v;
        while (p < end && !strchr(seps, *p)) p++;
        if (add(l, key, v, (size_t)(p - v), e)) return -1;
        v = p + 1;
    }
    return 0;
}

static int seeds(const list *l, uint64_t *out, qs_err *e)
{
    for (int i = 0; i < l->n; i++) {
        char *end;
        unsigned long long v = strtoull(l->item[i], &end, 10);
        if (*end || l->item[i][0] == '-') return qs_fail(e, "--sweep: seed '%s' is not a number", l->item[i]);
        out[i] = v;
    }
    return 0;
}

static int cross(qs_rl_sweep *s, const list *ro, const list *tr, const list *co, const list *se, qs_err *e)
{
    uint64_t sd[MAXL];
    if (seeds(se, sd, e)) return -1;
    if ((size_t)ro->n * tr->n * co->n * se->n > QS_RL_SWEEP_MAX) return qs_fail(e, "--sweep: more than %d runs", QS_RL_SWEEP_MAX);
    for (int k = 0; k < se->n; k++)
        for (int a = 0; a < ro->n; a++)
            for (int b = 0; b < tr->n; b++)
                for (int c = 0; c < co->n; c++) {
                    qs_rl_sweep_run *r = &s->run[s->n++];
                    strcpy(r->rollout, strcmp(ro->item[a], "default") ? ro->item[a] : "");   /* both < 96 bytes */
                    if (strlen(tr->item[b]) >= sizeof r->trainer || strlen(co->item[c]) >= sizeof r->correction)
                        return qs_fail(e, "--sweep: trainer '%s' or correction '%s' is too long", tr->item[b], co->item[c]);
                    strcpy(r->trainer, tr->item[b]);
                    strcpy(r->correction, co->item[c]);
                    r->seed = sd[k];
                }
    return 0;
}

static void one(qs_rl_sweep *s, const char *rollout, const char *trainer, const char *corr, uint64_t seed)
{
    qs_rl_sweep_run *r = &s->run[s->n++];
    snprintf(r->rollout, sizeof r->rollout, "%s", rollout);
    snprintf(r->trainer, sizeof r->trainer, "%s", trainer);
    snprintf(r->correction, sizeof r->correction, "%s", corr);
    r->seed = seed;
}

/* The presets (docs/rl.md, "Sweeps"): seeds 1, 2, 3, seed-major. */
static int preset(const char *name, qs_rl_sweep *s)
{
    static const char *fp4[] = {"hif4", "mxfp4"};
    if (!strcmp(name, "hif4-rl")) {   /* BF16 vs full FP4 vs FP4 rollout with a high-precision trainer */
        for (uint64_t sd = 1; sd <= 3; sd++) {
            one(s, "", "bf16", "none", sd);
            for (int f = 0; f < 2; f++) {
                char ro[96];
                snprintf(ro, sizeof ro, "w=%s,a=%s", fp4[f], fp4[f]);
                one(s, "", fp4[f], "none", sd);
                one(s, ro, "fp32", "none", sd);
                one(s, ro, "bf16", "none", sd);
            }
        }
    } else if (!strcmp(name, "ais")) {   /* an MXFP4 rollout, FP32 trainer, every correction */
        static const char *m[] = {"none", "tis", "icepop", "seq_mis", "geo_rs", "ais_r"};
        for (uint64_t sd = 1; sd <= 3; sd++)
            for (int k = 0; k < 6; k++) one(s, "w=mxfp4,a=mxfp4", "fp32", m[k], sd);
    } else if (!strcmp(name, "resq")) {   /* a BF16 rollout, and FP4 rollouts without and with Rollout-ResQ */
        static const char *rq[] = {"none", "dense", "2:4"};
        for (uint64_t sd = 1; sd <= 3; sd++) {
            one(s, "w=bf16,a=bf16", "fp32", "none", sd);
            for (int f = 0; f < 2; f++)
                for (int k = 0; k < 3; k++) {
                    char ro[96];
                    snprintf(ro, sizeof ro, "w=%s,a=%s,resq=%s", fp4[f], fp4[f], rq[k]);
                    one(s, ro, "fp32", "none", sd);
                }
        }
    } else return 0;
    snprintf(s->name, sizeof s->name, "%s", name);
    return 1;
}

/* "PRESET;seeds=LIST": the preset's runs of those seeds (a piece of it, under the preset's name). */
static int preset_seeds(const char *spec, qs_rl_sweep *s, qs_err *e)
{
    const char *semi = strchr(spec, ';');
    char name[32];
    if (!semi || (size_t)(semi - spec) >= sizeof name) return 0;
    memcpy(name, spec, (size_t)(semi - spec));
    name[semi - spec] = 0;
    if (!preset(name, s)) return 0;
    list l;
    uint64_t sd[MAXL];
    if (strncmp(semi + 1, "seeds=", 6)) return qs_fail(e, "--sweep: after preset %s only ;seeds=LIST", name);
    if (split(&l, "seeds", semi + 7, semi + strlen(semi), ",|", e) || seeds(&l, sd, e)) return -1;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        for (int j = 0; j < l.n; j++)
            if (s->run[i].seed == sd[j]) { s->run[k++] = s->run[i]; break; }
    s->n = k;
    return 1;
}

int qs_rl_sweep_parse(const char *spec, qs_rl_sweep *s, qs_err *e)
{
    s->n = 0;
    if (preset(spec, s)) return 0;
    int ps = preset_seeds(spec, s, e);
    if (ps) return ps < 0 ? -1 : 0;
    s->n = 0;
    if (!strchr(spec, '='))
        return qs_fail(e, "--sweep: unknown preset '%s' (%s; or rollouts=..;trainers=..;corrections=..;seeds=..)", spec,
                       QS_RL_SWEEP_PRESETS);
    list l[4] = {{.n = 1}, {.n = 1}, {.n = 1}, {.n = 3}};
    strcpy(l[0].item[0], "default");
    strcpy(l[1].item[0], "fp32");
    strcpy(l[2].item[0], "none");
    strcpy(l[3].item[0], "1"), strcpy(l[3].item[1], "2"), strcpy(l[3].item[2], "3");
    static const char *keys[] = {"rollouts", "trainers", "corrections", "seeds"};
    int seen[4] = {0};
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ';');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq) return qs_fail(e, "--sweep: '%.*s' is not KEY=LIST", (int)(end - p), p);
        int k = 0;
        while (k < 4 && (strlen(keys[k]) != (size_t)(eq - p) || strncmp(keys[k], p, (size_t)(eq - p)))) k++;
        if (k == 4) return qs_fail(e, "--sweep: unknown key '%.*s' (rollouts, trainers, corrections, seeds)", (int)(eq - p), p);
        if (seen[k]++) return qs_fail(e, "--sweep: %s given twice", keys[k]);
        if (split(&l[k], keys[k], eq + 1, end, k == 0 ? "|" : ",|", e)) return -1;
        if (!*end) break;
        p = end + 1;
    }
    if (cross(s, &l[0], &l[1], &l[2], &l[3], e)) return -1;
    uint32_t h = 2166136261u;   /* FNV-1a of the spec: the same spec finds its runs again */
    for (const char *c = spec; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
    snprintf(s->name, sizeof s->name, "sweep-%08" PRIx32, h);
    return 0;
}
