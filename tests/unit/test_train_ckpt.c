/*
** Training checkpoints (store/train_ckpt.c, store/train_state.c) and the loop's resumption
** (analysis/train_loop.c: start_step, opt, sr_calls): a run stopped after step 3 and continued from
** there with its moments and call counter gives the uninterrupted run bit for bit (nvfp4, with SR).
** The model, AdamW's moments and
** trainer_state.json round-trip bit for bit (tied and untied heads, with Q/K/V biases); a second
** checkpoint replaces the first whole and leaves no temporary directory; damaged or missing files are
** refused naming the file (and the field); --out's check refuses a directory with other files, a
** symbolic link and an unnamed directory (".", "/").
*/
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../analysis/train_loop.h"
#include "../../store/llm_load.h"
#include "../../store/train_ckpt.h"

static char g_dir[512];

static int setup(void **st)
{
    (void)st;
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/qs_ckpt_XXXXXX", t && *t ? t : P_tmpdir);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path(char *out, size_t cap, const char *a, const char *b)
{
    snprintf(out, cap, "%s/%s%s%s", g_dir, a, b ? "/" : "", b ? b : "");
}

static void make_model(qs_llm_model *m, int tied, int bias, uint64_t seed)
{
    qs_err e = {{0}};
    qs_llm_cfg c = {.n_layer = 2, .dim = 16, .n_head = 4, .n_kv_head = 2, .head_dim = 4, .ffn = 24, .vocab = 256,
                    .ctx = 8, .rope_base = 10000, .eps = 1e-5f, .rope_neox = 1};
    assert_int_equal(qs_llm_alloc(m, &c, tied, &e), 0);
    if (bias) assert_int_equal(qs_llm_alloc_bias(m, &e), 0);
    qs_train_init(m, seed);
    if (bias)
        for (size_t i = 0; i < m->bias_len; i++) m->bias_arena[i] = (float)sin((double)i) * 0.1f;
    if (!tied)
        for (size_t i = 0; i < (size_t)c.vocab * c.dim; i++) m->output[i] = (float)cos((double)i) * 0.02f;
}

static void fill_opt(qs_adamw *o, float k)
{
    for (size_t i = 0; i < o->arena_len + o->bias_len; i++) {
        o->m[i] = k * (float)sin(0.1 * (double)i);
        o->v[i] = k * (float)(i % 97) * 1e-4f;
    }
    o->t = 7;
}

static void fill_state(qs_train_state *s, int step)
{
    static char t0[] = "/data/a.txt", t1[] = "/data/b.txt", val[] = "/data/p.txt", rec[] = "nvfp4", op0[] = "fwd.x=mxfp4";
    memset(s, 0, sizeof *s);
    *s = (qs_train_state){.step = step, .steps = 20, .adam_t = step, .sr_calls = 18446744073709551615ULL, .layers = 2,
                          .dim = 16, .heads = 4, .kv_heads = 2, .head_dim = 4, .ffn = 24, .vocab = 256, .tied = 1,
                          .batch = 4, .ctx = 8, .accum = 2, .warmup = 3, .eval_every = 5, .val_seqs = 4, .ckpt_every = 5,
                          .lr = 3e-3, .min_frac = 0.1, .clip = 1, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .wd = 0.1,
                          .seed = 12345678901234567ULL, .recipe = rec, .nops = 1, .ntext = 2, .val_text = val,
                          .ntrain = 1000, .nval = 100, .val0 = 5.5384399796642878};
    s->op[0] = op0;
    s->text[0] = t0;
    s->text[1] = t1;
    snprintf(s->data_hash, sizeof s->data_hash, "0123456789abcdef0123456789abcdef");
}

static void roundtrip(int tied, int bias)
{
    qs_err e = {{0}};
    qs_llm_model m;
    make_model(&m, tied, bias, 3);
    qs_adamw o;
    assert_int_equal(qs_adamw_new(&o, &m, &e), 0);
    fill_opt(&o, 1);
    qs_train_state s;
    fill_state(&s, 7);
    char dir[700];
    path(dir, sizeof dir, tied ? "tied" : "untied", NULL);
    qs_llm_save_tok tok = {NULL, 1, -1, -1};
    assert_int_equal(qs_train_ckpt_write(dir, &m, &tok, &o, &s, &e), 0);

    qs_llm_file f;
    assert_int_equal(qs_llm_load(dir, &f, &e), 0);
    assert_int_equal(f.m.arena_len, m.arena_len);
    assert_true(!memcmp(f.m.arena, m.arena, m.arena_len * sizeof(float)));
    assert_int_equal(f.m.output == f.m.tok_embd, tied);
    assert_int_equal(f.m.bias_arena != NULL, bias);
    if (bias) assert_true(!memcmp(f.m.bias_arena, m.bias_arena, m.bias_len * sizeof(float)));
    qs_adamw o2;
    assert_int_equal(qs_adamw_new(&o2, &f.m, &e), 0);
    assert_int_equal(qs_train_ckpt_read_opt(dir, &f.m, &o2, &e), 0);
    size_t n = o.arena_len + o.bias_len;
    assert_int_equal(o2.arena_len + o2.bias_len, n);
    assert_true(!memcmp(o2.m, o.m, n * sizeof(float)));
    assert_true(!memcmp(o2.v, o.v, n * sizeof(float)));

    qs_train_state r;
    assert_int_equal(qs_train_state_read(dir, &r, &e), 0);
    assert_int_equal(r.step, 7);
    assert_int_equal(r.adam_t, 7);
    assert_true(r.sr_calls == s.sr_calls && r.seed == s.seed);
    assert_true(r.lr == s.lr && r.min_frac == s.min_frac && r.beta2 == s.beta2 && r.eps == s.eps && r.wd == s.wd &&
                r.val0 == s.val0);
    assert_int_equal(r.accum, 2);
    assert_string_equal(r.recipe, "nvfp4");
    assert_int_equal(r.nops, 1);
    assert_string_equal(r.op[0], "fwd.x=mxfp4");
    assert_int_equal(r.ntext, 2);
    assert_string_equal(r.text[1], "/data/b.txt");
    assert_null(r.tokenizer);
    assert_null(r.run_name);
    assert_string_equal(r.data_hash, s.data_hash);
    qs_train_state_free(&r);
    qs_adamw_free(&o2);
    qs_llm_file_free(&f);
    qs_adamw_free(&o);
    qs_llm_free(&m);
}

static void test_roundtrip_tied(void **st) { (void)st; roundtrip(1, 0); }
static void test_roundtrip_untied_bias(void **st) { (void)st; roundtrip(0, 1); }

/* A second checkpoint replaces the first whole; no DIR.tmp-* is left behind. */
static void test_replace(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_model m;
    make_model(&m, 1, 0, 5);
    qs_adamw o;
    assert_int_equal(qs_adamw_new(&o, &m, &e), 0);
    fill_opt(&o, 1);
    qs_train_state s;
    fill_state(&s, 5);
    char dir[700];
    path(dir, sizeof dir, "rep", NULL);
    qs_llm_save_tok tok = {NULL, 1, -1, -1};
    assert_int_equal(qs_train_ckpt_write(dir, &m, &tok, &o, &s, &e), 0);
    fill_opt(&o, 2);
    m.arena[0] = 42;
    fill_state(&s, 10);
    assert_int_equal(qs_train_out_check(dir, &e), 0);
    assert_int_equal(qs_train_ckpt_write(dir, &m, &tok, &o, &s, &e), 0);
    qs_train_state r;
    assert_int_equal(qs_train_state_read(dir, &r, &e), 0);
    assert_int_equal(r.step, 10);
    qs_train_state_free(&r);
    qs_llm_file f;
    assert_int_equal(qs_llm_load(dir, &f, &e), 0);
    assert_true(f.m.arena[0] == 42.0f);
    qs_adamw o2;
    assert_int_equal(qs_adamw_new(&o2, &f.m, &e), 0);
    assert_int_equal(qs_train_ckpt_read_opt(dir, &f.m, &o2, &e), 0);
    assert_true(!memcmp(o2.m, o.m, o.arena_len * sizeof(float)));
    DIR *d = opendir(g_dir);
    struct dirent *de;
    int stale = 0;
    while ((de = readdir(d))) stale += !strncmp(de->d_name, "rep.", 4);
    closedir(d);
    assert_int_equal(stale, 0);
    qs_adamw_free(&o2);
    qs_llm_file_free(&f);
    qs_adamw_free(&o);
    qs_llm_free(&m);
}

static void put(const char *file, const char *text)
{
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Replace the first occurrence of `from` in file by `to`. */
static void edit(const char *file, const char *from, const char *to)
{
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *at = strstr(buf, from);
    assert_non_null(at);
    f = fopen(file, "w");
    fwrite(buf, 1, (size_t)(at - buf), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    fclose(f);
}

static void test_refusals(void **st)
{
    (void)st;
    qs_err e = {{0}};
    qs_llm_model m, m2;
    make_model(&m, 1, 0, 9);
    make_model(&m2, 0, 0, 9);   /* another shape: an output head of its own */
    qs_adamw o, o2;
    assert_int_equal(qs_adamw_new(&o, &m, &e), 0);
    assert_int_equal(qs_adamw_new(&o2, &m2, &e), 0);
    qs_train_state s;
    fill_state(&s, 5);
    char dir[700], dir2[700], p[800], p2[800];
    path(dir, sizeof dir, "bad", NULL);
    path(dir2, sizeof dir2, "other", NULL);
    qs_llm_save_tok tok = {NULL, 1, -1, -1};
    assert_int_equal(qs_train_ckpt_write(dir, &m, &tok, &o, &s, &e), 0);
    assert_int_equal(qs_train_ckpt_write(dir2, &m2, &tok, &o2, &s, &e), 0);
    snprintf(p, sizeof p, "%s/optimizer.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/optimizer.safetensors", dir2);

    /* the moments of another shape */
    assert_int_equal(rename(p2, p), 0);
    assert_int_equal(qs_train_ckpt_read_opt(dir, &m, &o, &e), -1);
    assert_non_null(strstr(e.msg, "optimizer.safetensors"));
    /* truncated */
    assert_int_equal(truncate(p, 100), 0);
    assert_int_equal(qs_train_ckpt_read_opt(dir, &m, &o, &e), -1);
    assert_non_null(strstr(e.msg, "optimizer.safetensors"));
    /* missing */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(qs_train_ckpt_read_opt(dir, &m, &o, &e), -1);
    assert_non_null(strstr(e.msg, "optimizer.safetensors"));

    /* trainer_state.json: a field of the wrong type, an inconsistent step, not JSON, missing */
    qs_train_state r;
    snprintf(p, sizeof p, "%s/trainer_state.json", dir);
    edit(p, "\"adam_t\": 5", "\"adam_t\": \"5\"");
    assert_int_equal(qs_train_state_read(dir, &r, &e), -1);
    assert_non_null(strstr(e.msg, "trainer_state.json"));
    assert_non_null(strstr(e.msg, "adam_t"));
    edit(p, "\"adam_t\": \"5\"", "\"adam_t\": 4");
    assert_int_equal(qs_train_state_read(dir, &r, &e), -1);
    assert_non_null(strstr(e.msg, "do not agree"));
    edit(p, "\"adam_t\": 4", "\"adam_t\": 5");
    assert_int_equal(qs_train_state_read(dir, &r, &e), 0);   /* the edits themselves are sound */
    qs_train_state_free(&r);
    edit(p, "\"hash\": \"0123", "\"hash\": \"x123");
    assert_int_equal(qs_train_state_read(dir, &r, &e), -1);
    assert_non_null(strstr(e.msg, "data.hash"));
    put(p, "{\"format\": \"qscope trainer_state\", \"vers");
    assert_int_equal(qs_train_state_read(dir, &r, &e), -1);
    assert_non_null(strstr(e.msg, "trainer_state.json"));
    put(p, "{\"format\": \"something else\", \"version\": 1}");
    assert_int_equal(qs_train_state_read(dir, &r, &e), -1);
    assert_non_null(strstr(e.msg, "not a qscope trainer state"));
    unlink(p);
    assert_int_equal(qs_train_state_read(dir, &r, &e), -1);
    assert_non_null(strstr(e.msg, "trainer_state.json"));

    /* --out: a directory holding other files, a file, a missing parent; a missing one is not created */
    char q[800];
    snprintf(q, sizeof q, "%s/notes.txt", dir);
    put(q, "mine");
    assert_int_equal(qs_train_out_check(dir, &e), -1);
    assert_non_null(strstr(e.msg, "notes.txt"));
    assert_int_equal(qs_train_out_check(q, &e), -1);
    assert_non_null(strstr(e.msg, "not a directory"));
    path(q, sizeof q, "no/such", NULL);
    assert_int_equal(qs_train_out_check(q, &e), -1);
    assert_int_equal(qs_train_out_check(".", &e), -1);   /* swapped by renaming a sibling: needs a name */
    assert_int_equal(qs_train_out_check("/", &e), -1);
    path(q, sizeof q, "link", NULL);
    assert_int_equal(symlink(dir2, q), 0);   /* a symbolic link: swapping it would not replace the directory */
    assert_int_equal(qs_train_out_check(q, &e), -1);
    assert_non_null(strstr(e.msg, "symbolic link"));
    path(q, sizeof q, "fresh", NULL);
    assert_int_equal(qs_train_out_check(q, &e), 0);
    struct stat sb;
    assert_int_equal(stat(q, &sb), -1);
    qs_adamw_free(&o);
    qs_adamw_free(&o2);
    qs_llm_free(&m);
    qs_llm_free(&m2);
}

static int stop_at_3(void *ctx, const qs_train_rec *r)
{
    (void)ctx;
    return r->step == 3;
}

static void test_loop_resume(void **st)
{
    (void)st;
    qs_err e = {{0}};
    int32_t tok[3000];
    for (int i = 0; i < 3000; i++) tok[i] = (int32_t)((i * 7 + i / 13) % 256);
    qs_llm_recipe rec;
    assert_int_equal(qs_llm_recipe_preset("nvfp4", &rec, &e), 0);
    qs_llm_model a, b;
    make_model(&a, 1, 0, 11);
    make_model(&b, 1, 0, 11);
    qs_adamw oa, ob;
    assert_int_equal(qs_adamw_new(&oa, &a, &e), 0);
    assert_int_equal(qs_adamw_new(&ob, &b, &e), 0);
    uint64_t ca = 0, cb = 0;
    qs_train_opts o = {.batch = 2, .T = 8, .steps = 6, .accum = 2, .warmup = 2, .eval_every = 2, .val_seqs = 2,
                       .lr = 3e-3, .min_frac = 0.1, .clip = 1, .adam = {0.9, 0.95, 1e-8, 0.1}, .seed = 5,
                       .recipe = &rec, .opt = &oa, .sr_calls_out = &ca};
    qs_train_rec ra[6], rb[6];
    double v0;
    assert_int_equal(qs_train_run(&a, tok, 2500, tok + 2500, 500, &o, &v0, ra, NULL, NULL, &e), 0);
    o.opt = &ob;
    o.sr_calls_out = &cb;
    assert_int_equal(qs_train_run(&b, tok, 2500, tok + 2500, 500, &o, &v0, rb, stop_at_3, NULL, &e), -1);
    assert_true(cb > 0);
    assert_int_equal(ob.t, 3);
    o.start_step = 3;
    o.sr_calls = cb;
    v0 = -1;
    assert_int_equal(qs_train_run(&b, tok, 2500, tok + 2500, 500, &o, &v0, rb, NULL, NULL, &e), 0);
    assert_true(v0 == -1);   /* not measured when resuming */
    for (int i = 3; i < 6; i++) {
        assert_int_equal(rb[i].step, i + 1);
        assert_true(ra[i].train_loss == rb[i].train_loss && ra[i].grad_norm == rb[i].grad_norm && ra[i].lr == rb[i].lr);
    }
    assert_true(ra[5].val_loss == rb[5].val_loss);
    assert_true(ca == cb);
    assert_true(!memcmp(a.arena, b.arena, a.arena_len * sizeof(float)));
    assert_true(!memcmp(oa.m, ob.m, oa.arena_len * sizeof(float)) && !memcmp(oa.v, ob.v, oa.arena_len * sizeof(float)));
    /* a start beyond the end is refused */
    o.start_step = 7;
    assert_int_equal(qs_train_run(&b, tok, 2500, tok + 2500, 500, &o, &v0, rb, NULL, NULL, &e), -1);
    qs_adamw_free(&oa);
    qs_adamw_free(&ob);
    qs_llm_free(&a);
    qs_llm_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_tied),
        cmocka_unit_test(test_roundtrip_untied_bias),
        cmocka_unit_test(test_replace),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_loop_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
