/* The default GRPO policy: pre-trained once on the task's text, cached (grpo_policy.h). */
#include "grpo_policy.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "train_service.h"
#include "../kernels/qs_clock.h"
#include "../kernels/qs_version.h"
#include "../store/train_ckpt.h"

/* The budget (measured on 2 cores, docs/rl.md "GRPO on a transformer"): steps per task, so that the
** sampled reward of the pre-trained policy starts between 0.1 and 0.5. */
static int budget_steps(qs_rl_task t) { return t == QS_RL_TASK_ADD ? 2500 : 300; }
enum { TEXT_LINES = 20000, VAL_LINES = 1000, P_LAYERS = 2, P_DIM = 64, P_HEADS = 4, P_CTX = 32, P_BATCH = 16 };
#define TEXT_SEED 0x70726574ULL   /* the pre-training text; the validation text uses TEXT_SEED + 1 */

const char *qs_grpo_policy_settings(qs_rl_task t, char *buf, size_t cap)
{
    snprintf(buf, cap, "task=%s text=%d lines seed %llu, layers=%d dim=%d heads=%d ctx=%d batch=%d steps=%d lr=1e-3 "
             "warmup=20 wd=0.1 seed=0 bytes",
             qs_rl_task_name(t), TEXT_LINES, (unsigned long long)TEXT_SEED, P_LAYERS, P_DIM, P_HEADS, P_CTX, P_BATCH,
             budget_steps(t));
    return buf;
}

static int cache_root(char *out, size_t cap, qs_err *e)
{
    const char *q = getenv("QSCOPE_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (q && *q) snprintf(out, cap, "%s", q);
    else if (x && *x) snprintf(out, cap, "%s/qscope", x);
    else if (h && *h) snprintf(out, cap, "%s/.cache/qscope", h);
    else return qs_fail(e, "no cache directory for the default policy: set QSCOPE_CACHE, XDG_CACHE_HOME or HOME "
                           "(or give --model)");
    return 0;
}

/* mkdir -p */
static int mkdirs(const char *path, qs_err *e)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return qs_fail(e, "%s: cannot create: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) && errno != EEXIST) return qs_fail(e, "%s: cannot create: %s", buf, strerror(errno));
    return 0;
}

static int write_text(const char *path, qs_rl_task t, uint64_t seed, size_t lines, qs_err *e)
{
    size_t cap = lines * 24 + 1;
    char *buf = malloc(cap);
    if (!buf) return qs_fail(e, "out of memory");
    size_t n = qs_rl_task_text(t, seed, lines, buf, cap);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, n, f) == n;
    if (f && fclose(f)) ok = 0;
    free(buf);
    return ok ? 0 : qs_fail(e, "%s: cannot write: %s", path, strerror(errno));
}

/* Remove a directory of plain files we wrote (the texts, a checkpoint that lost a race). */
static void rm_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[1400];
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static int pretrain(qs_rl_task t, const char *dir, int quiet, qs_grpo_policy *p, qs_err *e)
{
    char tdir[1100], ckpt[1100], tr[1200], va[1200];
    snprintf(tdir, sizeof tdir, "%s.text-%ld", dir, (long)getpid());
    snprintf(ckpt, sizeof ckpt, "%s.tmp-%ld", dir, (long)getpid());
    snprintf(tr, sizeof tr, "%s/train.txt", tdir);
    snprintf(va, sizeof va, "%s/val.txt", tdir);
    if (mkdirs(tdir, e) || write_text(tr, t, TEXT_SEED, TEXT_LINES, e) || write_text(va, t, TEXT_SEED + 1, VAL_LINES, e)) {
        rm_flat_dir(tdir);
        return -1;
    }
    const char *texts[1] = {tr};
    qs_train_job j;
    memset(&j, 0, sizeof j);
    j.out = ckpt;
    j.text = texts;
    j.ntext = 1;
    j.val_text = va;
    j.layers = P_LAYERS;
    j.dim = P_DIM;
    j.heads = P_HEADS;
    j.t = (qs_train_opts){.batch = P_BATCH, .T = P_CTX, .steps = budget_steps(t), .accum = 1, .warmup = 20,
                          .eval_every = 0, .val_seqs = 16, .lr = 1e-3, .min_frac = 0.1, .clip = 1.0,
                          .adam = {0.9, 0.95, 1e-8, 0.1}, .seed = 0};
    if (!quiet)
        fprintf(stderr, "qscope: pre-training the default %s policy (%d steps, once; kept in %s)\n", qs_rl_task_name(t),
                j.t.steps, dir);
    double t0 = qs_now_s();
    qs_train_result r;
    memset(&r, 0, sizeof r);
    int rc = qs_train_job_run(&j, &r, e);
    rm_flat_dir(tdir);
    if (rc) { qs_train_result_free(&r); return -1; }
    p->secs = qs_now_s() - t0;
    p->steps = j.t.steps;
    p->val_loss = r.steps_done > 0 ? r.rec[r.steps_done - 1].val_loss : NAN;
    qs_train_result_free(&r);
    if (rename(ckpt, dir)) {
        if (access(dir, F_OK) == 0) {   /* another process put it there first: theirs is the same */
            rm_flat_dir(ckpt);
            return 0;
        }
        return qs_fail(e, "%s: cannot rename %s to it: %s", dir, ckpt, strerror(errno));
    }
    p->trained = 1;
    return 0;
}

int qs_grpo_policy_get(qs_rl_task t, int quiet, qs_grpo_policy *p, qs_err *e)
{
    memset(p, 0, sizeof *p);
    p->val_loss = NAN;
    char root[900], set[512];
    if (cache_root(root, sizeof root, e)) return -1;
    qs_grpo_policy_settings(t, set, sizeof set);
    char key[600];
    snprintf(key, sizeof key, "%s|%s", set, QS_VERSION);
    unsigned long long h = (unsigned long long)XXH3_64bits(key, strlen(key));
    snprintf(p->dir, sizeof p->dir, "%s/policies/%s-%016llx", root, qs_rl_task_name(t), h);
    char cfg[1100];
    snprintf(cfg, sizeof cfg, "%s/config.json", p->dir);
    p->steps = budget_steps(t);
    if (access(cfg, F_OK) == 0) return 0;
    char parent[1000];
    snprintf(parent, sizeof parent, "%s/policies", root);
    if (mkdirs(parent, e)) return -1;
    return pretrain(t, p->dir, quiet, p, e);
}
