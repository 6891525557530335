/*
** The default training configuration and sweeps (see train_sweep.h).
*/
#include "train_sweep.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "../kernels/llm_recipe.h"
#include "../store/llm_load.h"

static const char *const kDefaultRecipes[] = {"bf16", "hif4", "mxfp4", "nvfp4", "mxfp8"};
static const uint64_t kDefaultSeeds[] = {1, 2, 3};

void qs_train_defaults(qs_train_shape *s, qs_train_opts *t)
{
    /* measured in docs/train.md ("The default model"): validation loss 5.57 -> 1.91 in 300 steps,
    ** ~45 s in FP32 on 2 cores */
    *s = (qs_train_shape){.layers = 4, .dim = 128, .heads = 4, .kv_heads = 4, .ffn = 512};
    *t = (qs_train_opts){.batch = 8, .T = 128, .steps = 300, .accum = 1, .warmup = 20, .eval_every = 50, .val_seqs = 16,
                         .lr = 3e-3, .min_frac = 0.1, .clip = 1.0, .adam = {0.9, 0.95, 1e-8, 0.1}, .seed = 0};
}

void qs_train_quick(qs_train_shape *s, qs_train_opts *t)
{
    qs_train_defaults(s, t);
    *s = (qs_train_shape){.layers = 2, .dim = 32, .heads = 2, .kv_heads = 2, .ffn = 128};
    t->T = 32;
    t->steps = 40;
    t->warmup = 5;
    t->eval_every = 0;
}

static void set_defaults(qs_train_sweep *s, int recipes, int seeds)
{
    if (recipes) {
        s->nrecipe = (int)(sizeof kDefaultRecipes / sizeof *kDefaultRecipes);
        for (int i = 0; i < s->nrecipe; i++) snprintf(s->recipe[i], sizeof s->recipe[i], "%s", kDefaultRecipes[i]);
    }
    if (seeds) {
        s->nseed = (int)(sizeof kDefaultSeeds / sizeof *kDefaultSeeds);
        memcpy(s->seed, kDefaultSeeds, sizeof kDefaultSeeds);
    }
}

static int add_recipe(qs_train_sweep *s, const char *w, qs_err *e)
{
    qs_llm_recipe r;
    qs_err pe = {{0}};
    if (qs_llm_recipe_preset(w, &r, &pe)) return qs_fail(e, "--sweep: %s", pe.msg);
    for (int i = 0; i < s->nrecipe; i++)
        if (!strcmp(s->recipe[i], w)) return qs_fail(e, "--sweep: recipe '%s' given twice", w);
    if (s->nrecipe == QS_SWEEP_MAX_RECIPES) return qs_fail(e, "--sweep: more than %d recipes", QS_SWEEP_MAX_RECIPES);
    if (strlen(w) >= sizeof s->recipe[0]) return qs_fail(e, "--sweep: recipe name '%.40s' too long", w);
    memcpy(s->recipe[s->nrecipe++], w, strlen(w) + 1);
    return 0;
}

static int add_seed(qs_train_sweep *s, const char *w, qs_err *e)
{
    char *end;
    if (!*w || *w == '-' || *w == '+') return qs_fail(e, "--sweep: seed '%s' is not a whole number", w);
    unsigned long long v = strtoull(w, &end, 10);
    if (*end) return qs_fail(e, "--sweep: seed '%s' is not a whole number", w);
    for (int i = 0; i < s->nseed; i++)
        if (s->seed[i] == v) return qs_fail(e, "--sweep: seed %s given twice", w);
    if (s->nseed == QS_SWEEP_MAX_SEEDS) return qs_fail(e, "--sweep: more than %d seeds", QS_SWEEP_MAX_SEEDS);
    s->seed[s->nseed++] = v;
    return 0;
}

int qs_train_sweep_parse(const char *spec, qs_train_sweep *s, qs_err *e)
{
    memset(s, 0, sizeof *s);
    if (!spec || !*spec) return qs_fail(e, "--sweep: empty (give 'default' or recipes=A,B,...,seeds=1,2,3)");
    if (!strcmp(spec, "default")) { set_defaults(s, 1, 1); return 0; }
    char buf[1024];
    if (strlen(spec) >= sizeof buf) return qs_fail(e, "--sweep: longer than %zu characters", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    int key = -1, seen_r = 0, seen_s = 0;   /* key: 0 recipes, 1 seeds */
    for (char *w = buf, *next; w; w = next) {
        next = strchr(w, ',');
        if (next) *next++ = 0;
        char *eq = strchr(w, '=');
        if (eq) {
            *eq = 0;
            if (!strcmp(w, "recipes")) key = 0;
            else if (!strcmp(w, "seeds")) key = 1;
            else return qs_fail(e, "--sweep: unknown key '%s' (recipes=..., seeds=...)", w);
            if (key == 0 ? seen_r++ : seen_s++) return qs_fail(e, "--sweep: %s= given twice", w);
            w = eq + 1;
        } else if (key < 0)
            return qs_fail(e, "--sweep: '%s' is not 'default' or recipes=A,B,...,seeds=1,2,3", spec);
        if (!*w) return qs_fail(e, "--sweep: an empty %s entry", key ? "seed" : "recipe");
        if (key == 0 ? add_recipe(s, w, e) : add_seed(s, w, e)) return -1;
    }
    set_defaults(s, !seen_r, !seen_s);
    return 0;
}

size_t qs_train_sweep_count(const qs_train_sweep *s) { return (size_t)s->nrecipe * (size_t)s->nseed; }

void qs_train_sweep_at(const qs_train_sweep *s, size_t i, const char **recipe, uint64_t *seed)
{
    *recipe = s->recipe[i % (size_t)s->nrecipe];
    *seed = s->seed[i / (size_t)s->nrecipe];
}

void qs_train_config_key(const qs_train_shape *s, const qs_train_opts *t, const char *tokenizer,
                         const char *const *text, int ntext, const char *val_text, char *buf, size_t cap)
{
    int k = snprintf(buf, cap,
                     "layers=%d dim=%d heads=%d kv_heads=%d ffn=%d ctx=%d batch=%d steps=%d accum=%d warmup=%d "
                     "eval_every=%d val_seqs=%d lr=%.17g min_frac=%.17g clip=%.17g b1=%.17g b2=%.17g eps=%.17g "
                     "wd=%.17g tokenizer=%s val=%s texts=",
                     s->layers, s->dim, s->heads, s->kv_heads, s->ffn, t->T, t->batch, t->steps, t->accum, t->warmup,
                     t->eval_every, t->val_seqs, t->lr, t->min_frac, t->clip, t->adam.beta1, t->adam.beta2, t->adam.eps,
                     t->adam.wd, tokenizer ? tokenizer : "bytes", val_text);
    for (int i = 0; i < ntext && k > 0 && (size_t)k < cap; i++)
        k += snprintf(buf + k, cap - (size_t)k, "%s%s", i ? "," : "", text[i]);
}

void qs_train_default_key(char *buf, size_t cap)
{
    qs_train_shape s;
    qs_train_opts t;
    qs_train_defaults(&s, &t);
    char paths[64][300];
    const char *tx[64];
    int n = 0;
    qs_train_default_texts(paths, 64, &n);
    for (int i = 0; i < n; i++) tx[i] = paths[i];
    qs_train_config_key(&s, &t, NULL, tx, n, QS_LLM_DEFAULT_TEXT, buf, cap);
}

void qs_train_sweep_name(const char *cfg, char *buf, size_t cap)
{
    char def[8192];
    qs_train_default_key(def, sizeof def);
    if (!strcmp(cfg, def)) { snprintf(buf, cap, "default"); return; }
    snprintf(buf, cap, "sweep-%08" PRIx32, (uint32_t)XXH3_64bits(cfg, strlen(cfg)));
}

void qs_train_sweep_run_name(const char *sweep, const char *recipe, uint64_t seed, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s-%s-s%" PRIu64, sweep, recipe, seed);
}

void qs_train_default_texts(char (*paths)[300], int max, int *n)
{
    *n = 0;
    DIR *d = opendir(QS_TRAIN_TEXT_DIR);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) && *n < max) {
        size_t l = strlen(de->d_name);
        if (l < 5 || l > 250 || strcmp(de->d_name + l - 4, ".txt") || de->d_name[0] == '.' ||
            !strcmp(de->d_name, QS_LLM_DEFAULT_TEXT_NAME ".txt"))
            continue;
        snprintf(paths[*n], 300, "%s/%s", QS_TRAIN_TEXT_DIR, de->d_name);
        (*n)++;
    }
    closedir(d);
    /* readdir order is the file system's: sort for a reproducible token stream */
    for (int i = 1; i < *n; i++)
        for (int j = i; j > 0 && strcmp(paths[j - 1], paths[j]) > 0; j--) {
            char tmp[300];
            memcpy(tmp, paths[j], sizeof tmp);
            memcpy(paths[j], paths[j - 1], sizeof tmp);
            memcpy(paths[j - 1], tmp, sizeof tmp);
        }
}
