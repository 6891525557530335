/*
** Training checkpoints written atomically, their optimizer moments, and the --out check (see
** train_ckpt.h).  Crash points: a kill while DIR.tmp-XXXXXX is written leaves DIR as it was (and a
** stale temporary directory, never read); the swap is one rename; a kill after it leaves the old
** checkpoint in the temporary directory, again never read.  QSCOPE_TEST_CKPT_KILL=STAGE@N kills the
** process (SIGKILL) at the N-th checkpoint of the run at STAGE "files" (model written, moments not),
** "swap" (everything written, not swapped in) or "old" (swapped in, old one not removed): the test's
** way to hit each crash point.
*/
#include "train_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "container.h"

/* The files a checkpoint directory may hold (anything else: not ours, never replaced). */
static const char *const CKPT_FILES[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                         QS_TRAIN_OPT_FILE, QS_TRAIN_STATE_FILE, QS_GRPO_STATE_FILE};

static int is_ckpt_file(const char *name)
{
    for (size_t i = 0; i < sizeof CKPT_FILES / sizeof *CKPT_FILES; i++)
        if (!strcmp(name, CKPT_FILES[i])) return 1;
    return 0;
}

static void test_kill(const char *stage)
{
    static int nth[3];
    const char *h = getenv("QSCOPE_TEST_CKPT_KILL"), *at = h ? strchr(h, '@') : NULL;
    int k = stage[0] == 'f' ? 0 : stage[0] == 's' ? 1 : 2;
    nth[k]++;
    if (at && (size_t)(at - h) == strlen(stage) && !strncmp(h, stage, strlen(stage)) && atoi(at + 1) == nth[k])
        raise(SIGKILL);
}

/* m's tensors with their data in the moment array a (same offsets as in m's arenas). */
static int shadow(const qs_llm_model *m, float *a, size_t arena_len, qs_llm_model *s, qs_err *e)
{
    *s = *m;
    s->L = malloc((size_t)m->c.n_layer * sizeof *s->L);
    if (!s->L) return qs_fail(e, "out of memory");
    float *b = m->bias_arena ? a + arena_len : NULL;
#define RB(p) ((p) ? a + ((p) - m->arena) : NULL)
#define RBB(p) ((p) ? b + ((p) - m->bias_arena) : NULL)
    s->arena = a;
    s->bias_arena = b;
    s->tok_embd = RB(m->tok_embd);
    s->output = RB(m->output);
    s->out_norm = RB(m->out_norm);
    for (int l = 0; l < m->c.n_layer; l++) {
        const qs_llm_layer *L = &m->L[l];
        qs_llm_layer *S = &s->L[l];
        *S = *L;
        S->attn_norm = RB(L->attn_norm); S->wq = RB(L->wq); S->wk = RB(L->wk); S->wv = RB(L->wv); S->wo = RB(L->wo);
        S->ffn_norm = RB(L->ffn_norm); S->w_gate = RB(L->w_gate); S->w_up = RB(L->w_up); S->w_down = RB(L->w_down);
        S->bq = RBB(L->bq); S->bk = RBB(L->bk); S->bv = RBB(L->bv);
    }
#undef RB
#undef RBB
    return 0;
}

static int write_opt(const char *path, const qs_llm_model *m, const qs_adamw *opt, qs_err *e)
{
    if (opt->arena_len != m->arena_len || opt->bias_len != (m->bias_arena ? m->bias_len : 0))
        return qs_fail(e, "%s: the optimizer state does not have the model's shape", path);
    qs_llm_model sm, sv;
    if (shadow(m, opt->m, opt->arena_len, &sm, e)) return -1;
    if (shadow(m, opt->v, opt->arena_len, &sv, e)) { free(sm.L); return -1; }
    const qs_llm_model *ms[2] = {&sm, &sv};
    const char *suf[2] = {".m", ".v"};
    int rc = qs_llm_save_safetensors_n(path, ms, suf, 2, e);
    free(sm.L);
    free(sv.L);
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const qs_tdesc *)a)->name, ((const qs_tdesc *)b)->name);
}

/* Copy tensor t (expected shape and name) from the mapped file into its place. */
static int read_one(const char *path, const qs_container *c, const uint8_t *buf, const qs_llm_hf_tensor *t, qs_err *e)
{
    qs_tdesc key = {.name = (char *)t->name};
    const qs_tdesc *d = bsearch(&key, c->t, c->n, sizeof *c->t, cmp_name);
    if (!d) return qs_fail(e, "%s: tensor %s missing", path, t->name);
    uint64_t want = (t->rows ? t->rows : 1) * (uint64_t)t->cols;
    int shape_ok = t->rows ? d->ndim == 2 && d->shape[0] == t->rows && d->shape[1] == t->cols
                           : d->ndim == 1 && d->shape[0] == t->cols;
    if (d->dtype != QS_DT_F32 || !shape_ok || d->nbytes != 4 * want || d->codec != QS_CODEC_NONE)
        return qs_fail(e, "%s: tensor %s is not F32 of the model's shape", path, t->name);
    if (t->perm) return qs_fail(e, "%s: moments of an adjacent-pair RoPE model cannot be read back", path);
    memcpy((float *)t->p, buf + d->offset, (size_t)d->nbytes);
    return 0;
}

int qs_train_ckpt_read_opt(const char *dir, const qs_llm_model *m, qs_adamw *opt, qs_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%s", dir, QS_TRAIN_OPT_FILE);
    qs_file_map fm = {0};
    qs_container c;
    memset(&c, 0, sizeof c);
    qs_llm_model sm = {0}, sv = {0};
    qs_llm_hf_tensor *t = NULL;
    int rc = -1;
    if (qs_file_map_open(path, &fm, e)) return -1;
    if (qs_parse_safetensors(fm.p, fm.n, &(qs_parse_opts){QS_DT_INVALID}, &c, e)) { qs_err_prefix(e, path); goto out; }
    if (shadow(m, opt->m, opt->arena_len, &sm, e) || shadow(m, opt->v, opt->arena_len, &sv, e)) goto out;
    int cap = 3 + 12 * m->c.n_layer;
    if (!(t = calloc(2 * (size_t)cap, sizeof *t))) { qs_fail(e, "out of memory"); goto out; }
    int n = qs_llm_hf_tensors(&sm, t, cap);
    qs_llm_hf_tensors(&sv, t + n, cap);
    for (int i = 0; i < n; i++) {
        strcat(t[i].name, ".m");
        strcat(t[n + i].name, ".v");
    }
    if (c.n != 2 * (size_t)n) { qs_fail(e, "%s: %zu tensors, the model's moments are %d", path, c.n, 2 * n); goto out; }
    qsort(c.t, c.n, sizeof *c.t, cmp_name);
    for (int i = 0; i < 2 * n; i++)
        if (read_one(path, &c, fm.p, &t[i], e)) goto out;
    rc = 0;
out:
    free(t);
    free(sm.L);
    free(sv.L);
    qs_container_free(&c);
    qs_file_map_close(&fm);
    return rc;
}

/* HF row h*hd + j*hd/2 + i goes back to row h*hd + 2i + j (the inverse of llm_save_hf.c's write). */
static void unpermute(const qs_llm_hf_tensor *t, int head_dim, float *tmp)
{
    size_t rows = t->rows ? t->rows : t->cols, w = t->rows ? t->cols : 1, hd = (size_t)head_dim, half = hd / 2;
    float *p = (float *)t->p;
    memcpy(tmp, p, rows * w * sizeof *p);
    for (size_t r = 0; r < rows; r++) {
        size_t h = r / hd, k = r % hd, j = k / half, i = k % half;
        memcpy(p + (h * hd + 2 * i + j) * w, tmp + r * w, w * sizeof *p);
    }
}

static void adjacent_one(qs_llm_model *m, float *tmp, qs_llm_hf_tensor *t, int cap)
{
    int n = qs_llm_hf_tensors(m, t, cap);   /* with rope_neox 0: Q/K tensors carry perm */
    for (int i = 0; i < n; i++)
        if (t[i].perm) unpermute(&t[i], m->c.head_dim, tmp);
}

int qs_train_ckpt_adjacent(qs_llm_model *m, qs_adamw *opt, qs_err *e)
{
    size_t big = qs_llm_q_dim(&m->c) * (size_t)m->c.dim;   /* the largest permuted tensor: wq */
    int cap = 3 + 12 * m->c.n_layer, rc = -1;
    float *tmp = malloc(big * sizeof *tmp);
    qs_llm_hf_tensor *t = calloc((size_t)cap, sizeof *t);
    qs_llm_model sm = {0}, sv = {0};
    m->c.rope_neox = 0;   /* before the shadows copy it */
    if (!tmp || !t) qs_fail(e, "out of memory");
    else if (!shadow(m, opt->m, opt->arena_len, &sm, e) && !shadow(m, opt->v, opt->arena_len, &sv, e)) {
        adjacent_one(m, tmp, t, cap);
        adjacent_one(&sm, tmp, t, cap);
        adjacent_one(&sv, tmp, t, cap);
        rc = 0;
    }
    if (rc) m->c.rope_neox = 1;
    free(sm.L);
    free(sv.L);
    free(tmp);
    free(t);
    return rc;
}

/* Flush a written file (a kill needs no flush; a power cut after the rename would). */
static int sync_path(const char *path, qs_err *e)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd)) {
        int err = errno;
        if (fd >= 0) close(fd);
        return qs_fail(e, "%s: cannot flush: %s", path, strerror(err));
    }
    close(fd);
    return 0;
}

/* Remove a checkpoint directory of ours (its checkpoint files, then itself); best effort. */
static void remove_ckpt_dir(const char *dir)
{
    char p[4200];
    for (size_t i = 0; i < sizeof CKPT_FILES / sizeof *CKPT_FILES; i++) {
        snprintf(p, sizeof p, "%.4000s/%s", dir, CKPT_FILES[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* Put the complete directory tmp in place of dir in one atomic step; tmp then holds the old one. */
static int swap_in(const char *tmp, const char *dir, qs_err *e)
{
    struct stat st;
    if (lstat(dir, &st) && errno == ENOENT) {
        if (rename(tmp, dir)) return qs_fail(e, "%s: cannot rename %s to it: %s", dir, tmp, strerror(errno));
        return 0;
    }
#ifdef RENAME_EXCHANGE
    if (!renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE)) return 0;
    if (errno != EINVAL && errno != ENOSYS) return qs_fail(e, "%s: cannot swap in %s: %s", dir, tmp, strerror(errno));
#endif
    /* no atomic exchange on this file system: move the old one aside first (a kill between the two
    ** renames leaves the checkpoint at DIR.old-XXXXXX) */
    char old[4200];
    snprintf(old, sizeof old, "%.4000s.old-%ld", dir, (long)getpid());
    if (rename(dir, old)) return qs_fail(e, "%s: cannot move aside: %s", dir, strerror(errno));
    if (rename(tmp, dir)) { rename(old, dir); return qs_fail(e, "%s: cannot rename %s to it: %s", dir, tmp, strerror(errno)); }
    if (rename(old, tmp)) remove_ckpt_dir(old);
    return 0;
}


static void parent_of(const char *dir, char *out, size_t cap)
{
    snprintf(out, cap, "%s", dir);
    size_t l = strlen(out);
    while (l > 1 && out[l - 1] == '/') out[--l] = 0;   /* "a/b/" is "a/b" */
    char *s = strrchr(out, '/');
    if (!s) snprintf(out, cap, ".");
    else if (s == out) out[1] = 0;
    else *s = 0;
}

/* Temporary directories a killed writer left beside dir (DIR.tmp-XXXXXX; never the only whole
** checkpoint, which is DIR): removed when they hold checkpoint files only (remove_ckpt_dir leaves
** anything else, and then the directory, alone).  DIR.old-PID of the fallback swap is kept. */
static void remove_stale(const char *dir)
{
    char par[4200], base[4200], p[8500];
    parent_of(dir, par, sizeof par);
    snprintf(base, sizeof base, "%s", dir);
    for (size_t l = strlen(base); l > 1 && base[l - 1] == '/';) base[--l] = 0;
    const char *b = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
    size_t bl = strlen(b);
    DIR *d = opendir(par);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (strncmp(n, b, bl) || strncmp(n + bl, ".tmp-", 5) || strlen(n + bl) != 11) continue;   /* mkdtemp's 6 */
        snprintf(p, sizeof p, "%s/%s", par, n);
        remove_ckpt_dir(p);
    }
    closedir(d);
}

static int write_train_state(const char *path, const void *s, qs_err *e) { return qs_train_state_write(path, s, e); }

int qs_train_ckpt_write(const char *dir, const qs_llm_model *m, const qs_llm_save_tok *tok, const qs_adamw *opt,
                        const qs_train_state *s, qs_err *e)
{
    return qs_ckpt_write(dir, m, tok, opt, QS_TRAIN_STATE_FILE, write_train_state, s, e);
}

int qs_ckpt_write(const char *dir, const qs_llm_model *m, const qs_llm_save_tok *tok, const qs_adamw *opt,
                  const char *state_file, qs_ckpt_state_fn write_state, const void *s, qs_err *e)
{
    char tmp[4200], p[4300], par[4200];
    if (strlen(dir) > 3800) return qs_fail(e, "%s: path too long", dir);
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (size_t l = strlen(tmp); l > 1 && tmp[l - 1] == '/';) tmp[--l] = 0;
    remove_stale(dir);
    strcat(tmp, ".tmp-XXXXXX");
    if (!mkdtemp(tmp)) return qs_fail(e, "%s: cannot create: %s", tmp, strerror(errno));
    mode_t um = umask(0);
    umask(um);
    chmod(tmp, 0777 & ~um);   /* mkdtemp makes 0700; a checkpoint is an ordinary directory */
    if (qs_llm_save_hf(tmp, m, tok, e)) goto fail;
    test_kill("files");
    snprintf(p, sizeof p, "%s/%s", tmp, QS_TRAIN_OPT_FILE);
    if (write_opt(p, m, opt, e)) goto fail;
    snprintf(p, sizeof p, "%s/%s", tmp, state_file);
    if (write_state(p, s, e)) goto fail;
    for (size_t i = 0; i < sizeof CKPT_FILES / sizeof *CKPT_FILES; i++) {
        snprintf(p, sizeof p, "%s/%s", tmp, CKPT_FILES[i]);
        if (access(p, F_OK) == 0 && sync_path(p, e)) goto fail;
    }
    if (sync_path(tmp, e)) goto fail;
    test_kill("swap");
    if (swap_in(tmp, dir, e)) goto fail;
    test_kill("old");
    remove_ckpt_dir(tmp);
    parent_of(dir, par, sizeof par);
    sync_path(par, &(qs_err){{0}});   /* the rename itself; a failure here is no reason to stop */
    return 0;
fail:
    remove_ckpt_dir(tmp);
    return -1;
}

int qs_train_out_check(const char *dir, qs_err *e)
{
    struct stat st;
    /* the checkpoint is swapped in by renaming a sibling: DIR must be named, not ".", ".." or "/" */
    char base[4200];
    snprintf(base, sizeof base, "%s", dir);
    for (size_t l = strlen(base); l > 1 && base[l - 1] == '/';) base[--l] = 0;
    const char *b = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
    if (!*b || !strcmp(b, ".") || !strcmp(b, ".."))
        return qs_fail(e, "%s: give the checkpoint directory by its name", dir);
    if (!lstat(dir, &st) && S_ISLNK(st.st_mode)) return qs_fail(e, "%s: a symbolic link; give the directory itself", dir);
    if (stat(dir, &st)) {
        if (errno != ENOENT) return qs_fail(e, "%s: %s", dir, strerror(errno));
        char par[4200];
        parent_of(dir, par, sizeof par);
        if (stat(par, &st) || !S_ISDIR(st.st_mode)) return qs_fail(e, "%s: its parent %s is not a directory", dir, par);
        if (access(par, W_OK | X_OK)) return qs_fail(e, "%s: cannot create in %s: %s", dir, par, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) return qs_fail(e, "%s: not a directory", dir);
    DIR *d = opendir(dir);
    if (!d) return qs_fail(e, "%s: cannot read: %s", dir, strerror(errno));
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && !is_ckpt_file(de->d_name))
            rc = qs_fail(e, "%s: holds %.200s, which is not a checkpoint file (give a new or empty directory, or a "
                            "checkpoint's)", dir, de->d_name);
    closedir(d);
    return rc;
}
