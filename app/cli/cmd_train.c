/*
** `qscope train`: train a small Llama-architecture model in FP32 (issue 26, second part) from scratch
** or from --init MODEL, on byte-level or a model's tokens, and write a Hugging Face checkpoint that
** `llm eval/generate/logits --model DIR` load.  The loop is analysis/train_loop.h; the optimizer
** kernels/llm_adamw.h; the writer store/llm_save_hf.h.  No recipes and no database storage yet.
*/
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../../analysis/llm_text.h"
#include "../../analysis/train_loop.h"
#include "../../kernels/llm_train.h"
#include "../../store/llm_load.h"
#include "../../store/llm_save_hf.h"

#define CMD "train"
#define MAX_TEXTS 256
#define DEFAULT_TEXT_DIR "data/text"

typedef struct opts {
    const char *tokenizer, *init, *out, *val_text, *text[MAX_TEXTS];
    int ntext, json, layers, dim, heads, kv_heads, ffn;
    qs_train_opts t;
    char dflt[MAX_TEXTS][300];   /* default training texts */
} opts;

static int parse_pos_f64(const char *opt, const char *s, double lo, double hi, double *out)
{
    if (qs_parse_f64(s, out) || !(*out >= lo && *out <= hi))
        return qs_cli_usage(CMD, "%s wants a number in %g..%g, not '%s'", opt, lo, hi, s);
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"tokenizer", 1, 0, 'k'}, {"init", 1, 0, 'i'}, {"out", 1, 0, 'o'}, {"text", 1, 0, 'x'}, {"val-text", 1, 0, 'v'},
        {"layers", 1, 0, 'L'}, {"dim", 1, 0, 'd'}, {"heads", 1, 0, 'H'}, {"kv-heads", 1, 0, 'K'}, {"ffn", 1, 0, 'f'},
        {"ctx", 1, 0, 'c'}, {"batch", 1, 0, 'b'}, {"steps", 1, 0, 'n'}, {"lr", 1, 0, 'l'}, {"warmup", 1, 0, 'w'},
        {"min-lr", 1, 0, 'm'}, {"wd", 1, 0, 'W'}, {"clip", 1, 0, 'C'}, {"accum", 1, 0, 'a'}, {"eval-every", 1, 0, 'e'},
        {"val-seqs", 1, 0, 'V'}, {"seed", 1, 0, 's'}, {"json", 0, 0, 'j'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'k': o->tokenizer = optarg; break;
        case 'i': o->init = optarg; break;
        case 'o': o->out = optarg; break;
        case 'v': o->val_text = optarg; break;
        case 'x':
            if (o->ntext == MAX_TEXTS) return qs_cli_usage(CMD, "more than %d --text files", MAX_TEXTS);
            o->text[o->ntext++] = optarg;
            while (optind < argc && argv[optind][0] != '-' && o->ntext < MAX_TEXTS) o->text[o->ntext++] = argv[optind++];
            break;
        case 'L': rc = qs_cli_parse_int(CMD, "--layers", optarg, 1, 256, &o->layers); break;
        case 'd': rc = qs_cli_parse_int(CMD, "--dim", optarg, 2, 65536, &o->dim); break;
        case 'H': rc = qs_cli_parse_int(CMD, "--heads", optarg, 1, 4096, &o->heads); break;
        case 'K': rc = qs_cli_parse_int(CMD, "--kv-heads", optarg, 1, 4096, &o->kv_heads); break;
        case 'f': rc = qs_cli_parse_int(CMD, "--ffn", optarg, 1, 1 << 18, &o->ffn); break;
        case 'c': rc = qs_cli_parse_int(CMD, "--ctx", optarg, 1, 1 << 16, &o->t.T); break;
        case 'b': rc = qs_cli_parse_int(CMD, "--batch", optarg, 1, 1 << 16, &o->t.batch); break;
        case 'n': rc = qs_cli_parse_int(CMD, "--steps", optarg, 1, 1 << 24, &o->t.steps); break;
        case 'w': rc = qs_cli_parse_int(CMD, "--warmup", optarg, 0, 1 << 24, &o->t.warmup); break;
        case 'a': rc = qs_cli_parse_int(CMD, "--accum", optarg, 1, 1 << 16, &o->t.accum); break;
        case 'e': rc = qs_cli_parse_int(CMD, "--eval-every", optarg, 0, 1 << 24, &o->t.eval_every); break;
        case 'V': rc = qs_cli_parse_int(CMD, "--val-seqs", optarg, 1, 1 << 16, &o->t.val_seqs); break;
        case 'l': rc = parse_pos_f64("--lr", optarg, 1e-30, 10, &o->t.lr); break;
        case 'm': rc = parse_pos_f64("--min-lr", optarg, 0, 1, &o->t.min_frac); break;
        case 'W': rc = parse_pos_f64("--wd", optarg, 0, 10, &o->t.adam.wd); break;
        case 'C': rc = parse_pos_f64("--clip", optarg, 0, 1e30, &o->t.clip); break;
        case 's':
            if (qs_parse_u64(optarg, (unsigned long long *)&o->t.seed)) return qs_cli_usage(CMD, "bad --seed '%s'", optarg);
            break;
        case 'j': o->json = 1; break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
        if (rc) return rc;
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->init && (o->layers || o->dim || o->heads || o->kv_heads || o->ffn))
        return qs_cli_usage(CMD, "--init takes the model's shape; drop --layers/--dim/--heads/--kv-heads/--ffn");
    return 0;
}

/* Default training texts: make data's data/text/ *.txt, except the evaluation text. */
static int default_texts(opts *o)
{
    DIR *d = opendir(DEFAULT_TEXT_DIR);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) && o->ntext < MAX_TEXTS) {
            size_t l = strlen(de->d_name);
            if (l < 5 || l > 250 || strcmp(de->d_name + l - 4, ".txt") || de->d_name[0] == '.' ||
                !strcmp(de->d_name, QS_LLM_DEFAULT_TEXT_NAME ".txt"))
                continue;
            snprintf(o->dflt[o->ntext], sizeof o->dflt[0], "%s/%s", DEFAULT_TEXT_DIR, de->d_name);
            o->ntext++;
        }
        closedir(d);
    }
    /* readdir order is the file system's: sort for a reproducible token stream */
    for (int i = 1; i < o->ntext; i++)
        for (int j = i; j > 0 && strcmp(o->dflt[j - 1], o->dflt[j]) > 0; j--) {
            char tmp[300];
            memcpy(tmp, o->dflt[j], sizeof tmp); memcpy(o->dflt[j], o->dflt[j - 1], sizeof tmp); memcpy(o->dflt[j - 1], tmp, sizeof tmp);
        }
    for (int i = 0; i < o->ntext; i++) o->text[i] = o->dflt[i];
    if (!o->ntext || (!o->val_text && access(QS_LLM_DEFAULT_TEXT, F_OK)))
        return qs_cli_usage(CMD, "no --text/--val-text given and %s/*.txt is not there (run `make data`)", DEFAULT_TEXT_DIR);
    return 0;
}

/* Append the tokens of each file to *ids (bytes when tok is NULL). */
static int read_tokens(const char *const *paths, int n, const qs_llm_file *tok, int32_t **ids, size_t *nids, qs_err *e)
{
    for (int i = 0; i < n; i++) {
        char *text = NULL, hash[33];
        size_t tlen = 0;
        int32_t *t = NULL;
        int nt = 0;
        if (qs_eval_read_text(paths[i], &text, &tlen, hash, e)) return -1;
        if (tok) {
            if (qs_eval_text_ids(paths[i], tok, text, tlen, &t, &nt, e)) { free(text); return -1; }
        } else {
            t = malloc((tlen ? tlen : 1) * sizeof *t);
            for (size_t k = 0; t && k < tlen; k++) t[k] = (unsigned char)text[k];
            nt = (int)tlen;
        }
        free(text);
        int32_t *grown = t ? realloc(*ids, (*nids + (size_t)nt + 1) * sizeof **ids) : NULL;
        if (!grown) { free(t); return qs_fail(e, "out of memory for the tokens of %s", paths[i]); }
        memcpy(grown + *nids, t, (size_t)nt * sizeof *t);
        *ids = grown;
        *nids += (size_t)nt;
        free(t);
    }
    return 0;
}

/* Bytes a run needs: weights, gradients and two AdamW moments (4 P floats) plus the training state.
** Refused beyond the machine's physical memory, before anything that large is allocated. */
static int check_memory(const qs_llm_cfg *c, int tied, int bias, const qs_train_opts *t, qs_err *e)
{
    double d = c->dim, q = (double)c->n_head * c->head_dim, kv = (double)c->n_kv_head * c->head_dim;
    double P = (double)c->vocab * d * (tied ? 1 : 2) + d +
               c->n_layer * (2 * d + 2 * q * d + 2 * kv * d + 3.0 * c->ffn * d + (bias ? q + 2 * kv : 0));
    double need = 4.0 * (4 * P + (double)qs_llm_train_state_floats(c, t->batch, t->T));
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have)
        return qs_fail(e, "training this model (%.3g parameters, batch %d, ctx %d) needs %.3g GB, more than the "
                          "machine's %.3g GB", P, t->batch, t->T, need / 1e9, have / 1e9);
    return 0;
}

/* The model to train: --init, or a new one of the options' shape (tied embeddings, rotate_half RoPE). */
static int make_model(const opts *o, int vocab, qs_llm_file *init, qs_llm_model *m, qs_err *e)
{
    if (o->init) {
        if (qs_llm_load(o->init, init, e)) return -1;
        *m = init->m;
        memset(&init->m, 0, sizeof init->m);
        return 0;
    }
    int heads = o->heads ? o->heads : 4, dim = o->dim ? o->dim : 64;
    if (dim % heads) return qs_fail(e, "--dim %d is not a multiple of --heads %d", dim, heads);
    qs_llm_cfg c = {.n_layer = o->layers ? o->layers : 2, .dim = dim, .n_head = heads,
                    .n_kv_head = o->kv_heads ? o->kv_heads : heads, .head_dim = dim / heads,
                    .ffn = o->ffn ? o->ffn : 4 * dim, .vocab = vocab, .ctx = o->t.T, .rope_base = 10000.0f,
                    .eps = 1e-5f, .rope_neox = 1};
    if (qs_llm_cfg_check(&c, e) || check_memory(&c, 1, 0, &o->t, e) || qs_llm_alloc(m, &c, 1, e)) return -1;
    qs_train_init(m, o->t.seed);
    return 0;
}

static int progress(void *ctx, const qs_train_rec *r)
{
    const opts *o = ctx;
    if (!o->json && !isnan(r->val_loss))
        printf("step %6d  train %.4f  val %.4f  |g| %.3g  lr %.3g  %.0f tok/s\n", r->step, r->train_loss, r->val_loss,
               r->grad_norm, r->lr, r->tok_s);
    else if (!o->json && isatty(2) && (r->step == 1 || r->step % 10 == 0))   /* a heartbeat on a terminal */
        fprintf(stderr, "step %d/%d  train %.4f\n", r->step, o->t.steps, r->train_loss);
    return 0;
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static void print_json(const opts *o, const qs_llm_model *m, size_t ntrain, size_t nval, double val0,
                       const qs_train_rec *rec)
{
    const qs_llm_cfg *c = &m->c;
    json_t *steps = json_array();
    for (int i = 0; i < o->t.steps; i++) {
        json_t *r = json_pack("{s:i,s:o,s:o,s:o,s:o}", "step", rec[i].step, "train_loss", num(rec[i].train_loss),
                              "grad_norm", num(rec[i].grad_norm), "lr", num(rec[i].lr), "tok_s", num(rec[i].tok_s));
        if (!isnan(rec[i].val_loss)) json_object_set_new(r, "val_loss", num(rec[i].val_loss));
        json_array_append_new(steps, r);
    }
    json_t *j = json_pack("{s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i},s:s,s:I,s:I,s:{s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:I},"
                          "s:o,s:o,s:o,s:s?}",
                          "model", "layers", c->n_layer, "dim", c->dim, "heads", c->n_head, "kv_heads", c->n_kv_head,
                          "head_dim", c->head_dim, "ffn", c->ffn, "vocab", c->vocab, "ctx", c->ctx, "tokenizer",
                          o->tokenizer ? o->tokenizer : o->init && c->vocab != 256 ? o->init : "bytes",
                          "train_tokens", (json_int_t)ntrain, "val_tokens", (json_int_t)nval, "options", "batch",
                          o->t.batch, "steps", o->t.steps, "accum", o->t.accum, "warmup", o->t.warmup, "lr", o->t.lr,
                          "min_lr", o->t.min_frac, "wd", o->t.adam.wd, "clip", o->t.clip, "seed", (json_int_t)o->t.seed,
                          "initial_val_loss", num(val0), "final_val_loss", num(rec[o->t.steps - 1].val_loss), "steps",
                          steps, "out", o->out);
    char *s = json_dumps(j, JSON_INDENT(1));
    if (s) puts(s);
    free(s);
    json_decref(j);
}

int qs_cmd_train(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    opts o;
    memset(&o, 0, sizeof o);
    o.t = (qs_train_opts){.batch = 8, .T = 64, .steps = 200, .accum = 1, .warmup = 20, .eval_every = 50, .val_seqs = 16,
                          .lr = 1e-3, .min_frac = 0.1, .clip = 1.0, .adam = {0.9, 0.95, 1e-8, 0.1}, .seed = 0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    if (o.out) {   /* a bad --out is found before the training, not after */
        struct stat st;
        if (mkdir(o.out, 0777) && errno != EEXIST) return qs_cli_error(QS_EXIT_ERR, "%s: cannot create: %s", o.out, strerror(errno));
        if (stat(o.out, &st) || !S_ISDIR(st.st_mode)) return qs_cli_error(QS_EXIT_ERR, "%s: not a directory", o.out);
    }
    const char *val_path = o.val_text ? o.val_text : QS_LLM_DEFAULT_TEXT;
    if (!o.ntext && (rc = default_texts(&o))) return rc;
    qs_err e = {{0}};
    qs_llm_file tokf, initf;
    memset(&tokf, 0, sizeof tokf);
    memset(&initf, 0, sizeof initf);
    qs_llm_model m;
    memset(&m, 0, sizeof m);
    int32_t *train = NULL, *val = NULL;
    size_t ntrain = 0, nval = 0;
    qs_train_rec *rec = NULL;
    const qs_llm_file *tok = NULL;
    rc = QS_EXIT_ERR;
    if (o.tokenizer) {
        if (qs_llm_load(o.tokenizer, &tokf, &e)) goto out;
        if (tokf.v.n <= 0) { qs_fail(&e, "%s: the model has no vocabulary", o.tokenizer); goto out; }
        tok = &tokf;
    }
    if (make_model(&o, tok ? tokf.m.c.vocab : 256, &initf, &m, &e)) goto out;
    if (o.init && !tok && m.c.vocab != 256) {
        if (initf.v.n <= 0) { qs_fail(&e, "%s: vocabulary of %d but no tokenizer (give --tokenizer)", o.init, m.c.vocab); goto out; }
        tok = &initf;
    }
    if (tok && tok->m.c.vocab && tok->m.c.vocab != m.c.vocab) {
        qs_fail(&e, "%s: vocabulary of %d tokens, the model has %d", o.tokenizer, tok->m.c.vocab, m.c.vocab);
        goto out;
    }
    if (o.t.T > m.c.ctx) { rc = qs_cli_usage(CMD, "--ctx %d exceeds the model's context %d", o.t.T, m.c.ctx); goto out; }
    if (o.init && check_memory(&m.c, m.output == m.tok_embd, m.bias_arena != NULL, &o.t, &e)) goto out;
    if (read_tokens(o.text, o.ntext, tok, &train, &ntrain, &e) || read_tokens(&val_path, 1, tok, &val, &nval, &e))
        goto out;
    if (!(rec = calloc((size_t)o.t.steps, sizeof *rec))) { qs_fail(&e, "out of memory"); goto out; }
    double val0 = NAN;
    if (!o.json)
        printf("train: %d layers, dim %d, %d/%d heads, ffn %d, vocab %d, ctx %d; %zu training tokens, %zu validation\n",
               m.c.n_layer, m.c.dim, m.c.n_head, m.c.n_kv_head, m.c.ffn, m.c.vocab, o.t.T, ntrain, nval);
    if (qs_train_run(&m, train, ntrain, val, nval, &o.t, &val0, rec, progress, &o, &e)) goto out;
    if (o.out) {
        /* tokenizer.json: copied from a Hugging Face directory, written for bytes, else none */
        const char *src = o.tokenizer ? o.tokenizer : o.init;
        char tj[4200];
        snprintf(tj, sizeof tj, "%s/tokenizer.json", src ? src : ".");
        qs_llm_save_tok st = {tok && access(tj, F_OK) == 0 ? src : NULL, !tok, tok ? tok->v.bos : -1, tok ? tok->v.eos : -1};
        if (qs_llm_save_hf(o.out, &m, &st, &e)) goto out;
    }
    if (o.json) print_json(&o, &m, ntrain, nval, val0, rec);
    else printf("validation loss %.4f -> %.4f%s%s\n", val0, rec[o.t.steps - 1].val_loss, o.out ? "; checkpoint " : "",
                o.out ? o.out : "");
    rc = QS_EXIT_OK;
out:
    if (rc == QS_EXIT_ERR) qs_cli_err(rc, &e);
    free(rec); free(train); free(val);
    qs_llm_free(&m);
    qs_llm_file_free(&tokf);
    qs_llm_file_free(&initf);
    return rc;
}
