/*
** `qscope llm score|capture|generate|logits|bench`: a real causal LM (SmolLM2-135M GGUF, or any
** llama-architecture GGUF) run through the FP32 forward pass of kernels/llm.h, with low-precision
** "rollout" numerics simulated by fake-quantization.  See docs/llm.md.
**
** score:   sample continuations with the low-precision rollout model (temperature 1, no top-k/p,
**          seeded), re-score the same token ids with the FP32 reference in one teacher-forced pass,
**          and store (lp_rollout, lp_train) per token as an RL-log run in rl_run / rl_token.
** capture: store the inputs of every linear layer (per layer and site) as tensors with metadata.
*/
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "llm_help.h"
#include "../../analysis/importer.h"
#include "../../analysis/llm_rollout.h"
#include "quant_opts.h"
#include "../../store/llm_load.h"
#include "../../analysis/llm_text.h"
#include "../../analysis/llm_eval.h"
#include "../../kernels/llm.h"
#include "../../kernels/qs_version.h"
#include "../../kernels/sr.h"
#include "../../store/npy_write.h"
#include "../../store/json_out.h"
#include "../../store/q_rl.h"
#include "../../store/rl_log.h"

#define LLM_LABEL "precision mismatch without training"

/* ---------------------------------------------------------------- options */

typedef struct llm_opts {
    const char *model, *name, *prefix, *prompt_ids, *out, *prompt_text;
    int chat;
    const char *wspec, *aspec, *kvspec;   /* format specs as given */
    qs_apply w, a, kv;
    int has_w, has_a, has_kv;
    qs_llm_resq resq;
    int scaled;
    int tokens, seqs, prompts, reps;
    int arith;                            /* --task arith */
    int all_sites;                        /* capture --sites all */
    unsigned long long seed;
    int json;
    int eval_ctx, eval_chunks;            /* bench: the llm eval case */
    double temp, top_p;                   /* generate: sampling filters */
    int top_k, greedy, filtered;
} llm_opts;

/* rows: the sites' name when they are rounded a token at a time (qs_llm_fmt_site_check), NULL for weights. */
static int parse_fmt(const char *cmd, const char *opt, const char *spec, qs_apply *out, int *has, const char *rows)
{
    if (!strcmp(spec, "fp32") || !strcmp(spec, "none")) { *has = 0; return 0; }
    if (qs_llm_parse_fmt(cmd, spec, out) || qs_llm_fmt_site_check(cmd, opt, spec, out, rows)) return -1;
    *has = 1;
    return 0;
}

/* Parse argv after the subcommand.  Returns 0, or an exit code. */
static int parse_opts(const char *cmd, int argc, char **argv, llm_opts *o)
{
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'}, {"rollout-format", required_argument, 0, 'w'},
        {"act-format", required_argument, 0, 'a'}, {"kv-format", required_argument, 0, 'k'},
        {"resq", required_argument, 0, 'r'}, {"unscaled-casts", no_argument, 0, 'u'},
        {"tokens", required_argument, 0, 'n'}, {"seqs", required_argument, 0, 'K'},
        {"prompts", required_argument, 0, 'P'}, {"seed", required_argument, 0, 's'},
        {"name", required_argument, 0, 'N'}, {"prefix", required_argument, 0, 'p'},
        {"prompt-ids", required_argument, 0, 'i'}, {"out", required_argument, 0, 'o'},
        {"json", no_argument, 0, 'j'}, {"reps", required_argument, 0, 'R'},
        {"prompt", required_argument, 0, 'T'}, {"chat", no_argument, 0, 'C'},
        {"task", required_argument, 0, 'A'}, {"sites", required_argument, 0, 'S'},
        {"eval-ctx", required_argument, 0, 'E'}, {"eval-chunks", required_argument, 0, 'G'},
        {"temp", required_argument, 0, 0x2001}, {"top-k", required_argument, 0, 0x2002},
        {"top-p", required_argument, 0, 0x2003}, {"greedy", no_argument, 0, 0x2004}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->scaled = 1;
    o->tokens = 64;
    o->seqs = 4;
    o->prompts = 2;
    o->reps = 3;
    o->eval_ctx = -1;   /* 512, or the model context if shorter */
    o->eval_chunks = 2;
    o->temp = 1;
    o->top_p = 1;
    o->wspec = o->aspec = o->kvspec = "fp32";
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":o:", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 'w': o->wspec = optarg; if (parse_fmt(cmd, "--rollout-format ", optarg, &o->w, &o->has_w, NULL)) return QS_EXIT_USAGE; break;
        case 'a': o->aspec = optarg; if (parse_fmt(cmd, "--act-format ", optarg, &o->a, &o->has_a, "activations")) return QS_EXIT_USAGE; break;
        case 'k': o->kvspec = optarg; if (parse_fmt(cmd, "--kv-format ", optarg, &o->kv, &o->has_kv, "the KV cache")) return QS_EXIT_USAGE; break;
        case 'r':
            if (!strcmp(optarg, "none")) o->resq = QS_RESQ_NONE;
            else if (!strcmp(optarg, "dense")) o->resq = QS_RESQ_DENSE;
            else if (!strcmp(optarg, "2:4")) o->resq = QS_RESQ_24;
            else return qs_cli_usage(cmd, "--resq wants none, dense or 2:4, not '%s'", optarg);
            break;
        case 'u': o->scaled = 0; break;
        case 'n': if (qs_cli_parse_int(cmd, "--tokens", optarg, 1, 4096, &o->tokens)) return QS_EXIT_USAGE; break;
        case 'K': if (qs_cli_parse_int(cmd, "--seqs", optarg, 1, 256, &o->seqs)) return QS_EXIT_USAGE; break;
        case 'P': if (qs_cli_parse_int(cmd, "--prompts", optarg, 1, 1000, &o->prompts)) return QS_EXIT_USAGE; break;
        case 's': if (qs_parse_u64(optarg, &o->seed)) return qs_cli_usage(cmd, "bad --seed '%s'", optarg); break;
        case 'N': o->name = optarg; break;
        case 'p': o->prefix = optarg; break;
        case 'i': o->prompt_ids = optarg; break;
        case 'o': o->out = optarg; break;
        case 'T': o->prompt_text = optarg; break;
        case 'C': o->chat = 1; break;
        case 'S':
            if (!strcmp(optarg, "all")) o->all_sites = 1;
            else if (!strcmp(optarg, "linear")) o->all_sites = 0;
            else return qs_cli_usage(cmd, "--sites wants linear or all, not '%s'", optarg);
            break;
        case 'A':
            if (!strcmp(optarg, "arith")) o->arith = 1;
            else if (!strcmp(optarg, "open")) o->arith = 0;
            else return qs_cli_usage(cmd, "--task wants open or arith, not '%s'", optarg);
            break;
        case 'j': o->json = 1; break;
        case 'R': if (qs_cli_parse_int(cmd, "--reps", optarg, 1, 100, &o->reps)) return QS_EXIT_USAGE; break;
        case 'E': if (qs_cli_parse_int(cmd, "--eval-ctx", optarg, 0, 1 << 16, &o->eval_ctx)) return QS_EXIT_USAGE; break;
        case 'G': if (qs_cli_parse_int(cmd, "--eval-chunks", optarg, 1, 1000, &o->eval_chunks)) return QS_EXIT_USAGE; break;
        case 0x2001:
            if (qs_parse_f64(optarg, &o->temp) || !(o->temp >= 0) || o->temp > 100) return qs_cli_usage(cmd, "--temp wants a number in 0..100, not '%s'", optarg);
            o->filtered = 1;
            break;
        case 0x2002: if (qs_cli_parse_int(cmd, "--top-k", optarg, 0, 1 << 22, &o->top_k)) return QS_EXIT_USAGE; o->filtered = 1; break;
        case 0x2003:
            if (qs_parse_f64(optarg, &o->top_p) || !(o->top_p > 0) || o->top_p > 1) return qs_cli_usage(cmd, "--top-p wants a number in (0, 1], not '%s'", optarg);
            o->filtered = 1;
            break;
        case 0x2004: o->greedy = 1; o->filtered = 1; break;
        case ':': return qs_cli_usage(cmd, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(cmd, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!o->model) return qs_cli_usage(cmd, "--model PATH.gguf is required");
    if (o->prompt_text && o->prompt_ids) return qs_cli_usage(cmd, "give --prompt or --prompt-ids, not both");
    if (o->chat && !o->prompt_text) return qs_cli_usage(cmd, "--chat wraps --prompt TEXT in the chat template");
    if (o->arith && (o->prompt_text || o->prompt_ids)) return qs_cli_usage(cmd, "--task arith makes its own prompts; drop --prompt/--prompt-ids");
    if (o->resq != QS_RESQ_NONE && !o->has_a) return qs_cli_usage(cmd, "--resq corrects activation rounding: give --act-format");
    if (o->filtered && strcmp(cmd, "llm generate"))
        return qs_cli_usage(cmd, "--temp, --top-k, --top-p and --greedy are for llm generate (%s samples the exact policy)", cmd);
    return 0;
}

/* Prompts: explicit ids, or chat-template openings found in the vocabulary by exact spelling. */

static int parse_ids(const char *s, const qs_llm_file *f, prompt_t *p, qs_err *e)
{
    p->n = 0;
    snprintf(p->label, sizeof p->label, "ids");
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v >= f->m.c.vocab) return qs_fail(e, "--prompt-ids: bad token id near '%.20s' (vocabulary %d)", s, f->m.c.vocab);
        if (p->n == MAX_PROMPT) return qs_fail(e, "--prompt-ids: more than %d ids", MAX_PROMPT);
        p->ids[p->n++] = (int32_t)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return qs_fail(e, "--prompt-ids: expected a comma near '%.20s'", s);
    }
    if (!p->n) return qs_fail(e, "--prompt-ids is empty");
    return 0;
}

char *qs_llm_chat_text(const char *text)
{
    static const char *sys = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
    size_t n = strlen(text) + 256;
    char *buf = malloc(n);
    if (buf) snprintf(buf, n, "%s<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", sys, text);
    return buf;
}

/* --prompt TEXT (optionally in the ChatML template of SmolLM2's tokenizer.chat_template, with its
** default system message) through the BPE tokenizer. */
static int text_prompt(const char *text, int chat, const qs_llm_file *f, prompt_t *p, qs_err *e)
{
    char *buf = chat ? qs_llm_chat_text(text) : strdup(text);
    if (!buf) return qs_fail(e, "out of memory");
    int k = qs_llm_tokenize_named(&f->v, "--prompt", buf, strlen(buf), p->ids, MAX_PROMPT, e);
    free(buf);
    if (k < 0) return -1;   /* the message names --prompt or the tokenizer's file */
    if (k == 0) return qs_fail(e, "--prompt gives no tokens");
    p->n = k;
    snprintf(p->label, sizeof p->label, "%s%.40s", chat ? "chat:" : "", text);
    return 0;
}

/* The prompt(s) of a command: --prompt, --prompt-ids or the defaults; 0 or -1 (usage error in e). */
static int get_prompts(const llm_opts *o, const qs_llm_file *f, prompt_t *ps, int want, qs_err *e);

static int default_prompts(const qs_llm_file *f, prompt_t *ps, int want)
{
    static const char *roles[] = {"assistant", "user", "system"};
    int st = qs_llm_vocab_find(&f->v, "<|im_start|>"), nl = qs_llm_vocab_find(&f->v, "\xc4\x8a");  /* "Ċ" = '\n' */
    int n = 0;
    if (st >= 0 && nl >= 0)
        for (int r = 0; r < 3 && n < want; r++) {
            int id = qs_llm_vocab_find(&f->v, roles[r]);
            if (id < 0) continue;
            ps[n].ids[0] = st; ps[n].ids[1] = id; ps[n].ids[2] = nl; ps[n].n = 3;
            snprintf(ps[n].label, sizeof ps[n].label, "<|im_start|>%s\\n", roles[r]);
            n++;
        }
    int first = f->v.bos >= 0 ? f->v.bos : 0;
    while (n < want) {   /* more prompts than chat openings: BOS / token 0 alone, distinct seeds */
        ps[n].ids[0] = (int32_t)first; ps[n].n = 1;
        snprintf(ps[n].label, sizeof ps[n].label, "<%d>", first);
        n++;
    }
    return n;
}

static int get_prompts(const llm_opts *o, const qs_llm_file *f, prompt_t *ps, int want, qs_err *e)
{
    for (int i = 0; i < want; i++) ps[i].answer = -1;
    if (o->arith) {   /* "What is A + B?" in the chat template, A and B in 1..9 from the seed */
        for (int i = 0; i < want; i++) {
            long a = 1 + (long)(qs_sr_uniform(o->seed ^ 0x5eedA417ull, 2 * (uint64_t)i) * 9);
            long b = 1 + (long)(qs_sr_uniform(o->seed ^ 0x5eedA417ull, 2 * (uint64_t)i + 1) * 9);
            char q[64];
            snprintf(q, sizeof q, "What is %ld + %ld?", a, b);
            if (text_prompt(q, 1, f, &ps[i], e)) return -1;
            ps[i].answer = a + b;
        }
        return 0;
    }
    if (o->prompt_ids || o->prompt_text) {
            if (o->prompt_ids ? parse_ids(o->prompt_ids, f, &ps[0], e) : text_prompt(o->prompt_text, o->chat, f, &ps[0], e)) return -1;
        for (int i = 1; i < want; i++) ps[i] = ps[0];
        return 0;
    }
    default_prompts(f, ps, want);
    return 0;
}

/* ---------------------------------------------------------------- model set-up */

static int load_models(const llm_opts *o, qs_llm_file *f, qs_llm_model *roll, int need_roll, qs_err *e)
{
    double t0 = qs_now_s();
    if (qs_llm_load(o->model, f, e)) return -1;
    fprintf(stderr, "qscope: loaded %s (%s, %d layers, dim %d, %d/%d heads, ffn %d, vocab %d; %s) in %.1f s\n",
            qs_esc(o->model), qs_llm_title(f), f->m.c.n_layer, f->m.c.dim, f->m.c.n_head, f->m.c.n_kv_head,
            f->m.c.ffn, f->m.c.vocab, f->wtypes, qs_now_s() - t0);
    if (!need_roll) return 0;
    if (!o->has_w) { *roll = f->m; return 0; }   /* shares the reference weights */
    if (qs_llm_clone(roll, &f->m, e)) return -1;
    if (qs_llm_quantize_weights(roll, &o->w, o->scaled, e)) { qs_llm_free(roll); return -1; }
    return 0;
}

static json_t *numerics_json(const llm_opts *o)
{
    json_t *j = json_object();
    const struct { const char *k; const qs_apply *a; int has; const char *spec; } it[3] = {
        {"weights", &o->w, o->has_w, o->wspec}, {"activations", &o->a, o->has_a, o->aspec}, {"kv_cache", &o->kv, o->has_kv, o->kvspec}};
    for (int i = 0; i < 3; i++) {
        if (!it[i].has) { json_object_set_new(j, it[i].k, json_string("fp32")); continue; }
        char *s = qs_quant_opts_json(it[i].a);
        json_t *v = s ? json_loads(s, 0, NULL) : NULL;
        free(s);
        json_object_set_new(j, it[i].k, v ? v : json_string(it[i].spec));
    }
    json_object_set_new(j, "resq", json_string(o->resq == QS_RESQ_DENSE ? "dense" : o->resq == QS_RESQ_24 ? "2:4" : "none"));
    json_object_set_new(j, "scaled_casts", json_boolean(o->scaled));
    return j;
}

/* ---------------------------------------------------------------- score */

/* Reward of each sequence for a task prompt: 1 when the detokenized completion contains the answer as
** a whole number, else 0.  Advantage: reward minus the mean reward of the prompt's group (GRPO's
** group baseline, without the division by the group's standard deviation). */
static void task_rewards(const qs_llm_file *f, const prompt_t *p, const rollout *ro, double *reward, double *adv)
{
    const int L = ro->plen + ro->N;
    double mean = 0;
    for (int b = 0; b < ro->B; b++) {
        char text[8192];
        size_t o = 0;
        for (int t = 0; t < ro->len[b] && o + 1 < sizeof text; t++)
            o += qs_llm_detok(&f->v, ro->tok[(size_t)b * L + ro->plen + t], text + o, sizeof text - o);
        text[o] = 0;
        reward[b] = 0;
        for (size_t i = 0; i < o; i++) {
            if (text[i] < '0' || text[i] > '9' || (i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9')) continue;
            char *end;
            long v = strtol(text + i, &end, 10);
            if (v == p->answer) { reward[b] = 1; break; }
        }
        mean += reward[b];
    }
    mean /= ro->B;
    for (int b = 0; b < ro->B; b++) adv[b] = reward[b] - mean;
}

/* Token rows of a whole score run, kept in memory until the model work is done: the write
** transaction then lasts milliseconds, not the minutes of sampling, so other writers never wait
** long enough to time out. */
typedef struct { qs_rl_row *r; size_t n, cap; } tokbuf;

static int collect_tokens(tokbuf *tb, int step, const rollout *ro, const double *lpt, const double *reward,
                          const double *adv, qs_err *e)
{
    const int L = ro->plen + ro->N;
    for (int b = 0; b < ro->B; b++)
        for (int t = 0; t < ro->len[b]; t++) {
            size_t i = (size_t)b * ro->N + t;
            double lr = ro->lp[i] > 0 ? 0 : ro->lp[i], lt = lpt[i] > 0 ? 0 : lpt[i];   /* rounding can give +1e-16 */
            if (!isfinite(lr) || !isfinite(lt) || !isfinite(ro->ent[i]))
                return qs_fail(e, "non-finite log-probability at prompt %d, sequence %d, position %d (%s numerics overflow?)",
                               step, b, t, isfinite(lt) ? "the rollout" : "the reference");
            if (tb->n == tb->cap) {
                size_t cap = tb->cap ? 2 * tb->cap : 4096;
                qs_rl_row *nr = realloc(tb->r, cap * sizeof *nr);
                if (!nr) return qs_fail(e, "out of memory");
                tb->r = nr;
                tb->cap = cap;
            }
            /* one group per prompt; advantage and reward only for a task (NaN: absent) */
            tb->r[tb->n++] = (qs_rl_row){step, b, t, ro->tok[(size_t)b * L + ro->plen + t], step, lr, lt,
                                         reward ? (adv ? adv[b] : 0) : NAN, reward ? reward[b] : NAN, ro->ent[i], 1};
        }
    return 0;
}

/* The one writer of rl_run/rl_token rows for llm score (columns documented in docs/llm.md). */
static int write_run(qs_db *db, const char *name, const char *source, const char *meta, const tokbuf *tb, int64_t *run_id,
                     qs_err *e)
{
    if (qs_rl_run_create(db, name, LLM_LABEL, source, meta, 0, run_id, e)) return -1;
    qs_rl_writer *w = qs_rl_writer_open(db, *run_id, e);
    int rc = !w || qs_rl_writer_rows(w, tb->r, tb->n, e) ? -1 : 0;
    qs_rl_writer_close(w);
    return rc;
}

/* What a score run adds up over its prompts. */
typedef struct score_sums {
    double t_roll, t_score, d, ad, k3, reward, er, et;
    long ntok, ngen;
} score_sums;

/* The run's name: --name, else model, formats and seed, whole (a cut name could give two runs one name). */
static char *score_run_name(const llm_opts *o)
{
    char *runname = NULL;
    const char *base = strrchr(o->model, '/') ? strrchr(o->model, '/') + 1 : o->model;
    int blen = (int)strcspn(base, ".");
    if (o->name) return strdup(o->name);
    if (asprintf(&runname, "llm:%.*s:w=%s:a=%s:kv=%s%s:seed=%llu", blen, base, o->wspec, o->aspec, o->kvspec,
                 o->resq ? (o->resq == QS_RESQ_DENSE ? ":resq=dense" : ":resq=2:4") : "", o->seed) < 0)
        return NULL;
    return runname;
}

/* The run's metadata before the model work: model, numerics, sampling, columns, prompts. */
static json_t *score_meta(const llm_opts *o, const qs_llm_file *f, const prompt_t *ps, int np)
{
    json_t *meta = json_object();
    json_object_set_new(meta, "generator", json_string("qscope llm score"));
    json_object_set_new(meta, "tool_version", json_string(QS_VERSION));
    json_t *mj = qs_llm_model_json(o->model, f);
    json_object_set_new(mj, "size", json_integer((json_int_t)f->size));
    json_object_set_new(mj, "layers", json_integer(f->m.c.n_layer));
    json_object_set_new(mj, "vocab", json_integer(f->m.c.vocab));
    json_object_set_new(meta, "model", mj);
    json_object_set_new(meta, "reference", json_string("fp32 forward over the dequantized GGUF weights"));
    json_object_set_new(meta, "rollout", numerics_json(o));
    json_object_set_new(meta, "sampling", json_pack("{s:f,s:s,s:I,s:i,s:i,s:i}", "temperature", 1.0, "filter", "none",
                                                    "seed", (json_int_t)o->seed, "tokens", o->tokens, "seqs_per_prompt", o->seqs,
                                                    "prompts", np));
    json_object_set_new(meta, "columns", json_string("step = prompt index (= grp), seq = sample index within the prompt, "
                        "pos = index of the generated token (0 = first), lp_rollout/lp_train = natural-log probability "
                        "of token_id under the rollout/reference numerics, entropy = rollout entropy (nats), "
                        "reward/advantage per sequence with --task arith (else NULL), mask 1"));
    json_t *jp = json_array();
    for (int i = 0; i < np; i++) {
        json_t *ids = json_array();
        for (int k = 0; k < ps[i].n; k++) json_array_append_new(ids, json_integer(ps[i].ids[k]));
        json_t *pj = json_object();
        qs_json_set_text(pj, "label", ps[i].label);   /* --prompt cut at 40 bytes: maybe mid-character */
        json_object_set_new(pj, "ids", ids);
        if (ps[i].answer >= 0) json_object_set_new(pj, "answer", json_integer(ps[i].answer));
        json_array_append_new(jp, pj);
    }
    json_object_set_new(meta, "prompt_ids", jp);
    return meta;
}

/* Every prompt: sample with the rollout numerics, score with the reference, keep the token rows. */
static int score_prompts(const llm_opts *o, const qs_llm_file *f, const qs_llm_model *roll, const prompt_t *ps, int np,
                         double *lpt, double *entt, tokbuf *tb, score_sums *s, qs_err *e)
{
    qs_llm_numerics rnx = {o->has_a ? &o->a : NULL, o->resq, o->has_kv ? &o->kv : NULL, o->scaled, NULL, NULL};
    rollout ro;
    memset(&ro, 0, sizeof ro);
    int bad = 0;
    for (int p = 0; !bad && p < np; p++) {
        double tr, ts;
        if (llm_rollout(roll, &rnx, &ps[p], o->seqs, o->tokens, f->v.eos, o->seed, (uint64_t)p, NULL, &ro, &tr, e) ||
            llm_score_tokens(&f->m, NULL, &ro, lpt, entt, &ts, e)) {
            bad = 1;
            break;
        }
        double rw[256], av[256];
        int task = ps[p].answer >= 0;
        if (task) {
            task_rewards(f, &ps[p], &ro, rw, av);
            for (int b = 0; b < ro.B; b++) s->reward += rw[b];
        }
        if (collect_tokens(tb, p, &ro, lpt, task ? rw : NULL, task ? av : NULL, e)) {
            bad = 1;
            break;
        }
        s->t_roll += tr;
        s->t_score += ts;
        for (int b = 0; b < ro.B; b++) {
            s->ngen += ro.N;
            for (int t = 0; t < ro.len[b]; t++) {
                double dl = lpt[(size_t)b * ro.N + t] - ro.lp[(size_t)b * ro.N + t];
                s->d += dl; s->ad += fabs(dl); s->k3 += expm1(dl) - dl;
                s->er += ro.ent[(size_t)b * ro.N + t]; s->et += entt[(size_t)b * ro.N + t];
                s->ntok++;
            }
        }
        llm_rollout_free(&ro);
    }
    llm_rollout_free(&ro);
    return bad ? -1 : 0;
}

/* The metadata known after the model work: throughput, summary, task. */
static void score_meta_finish(json_t *meta, const llm_opts *o, const prompt_t *ps, int np, const score_sums *s)
{
    const long n = s->ntok;
    json_t *th = json_pack("{s:f,s:f,s:I}", "rollout_sample_tokens_per_s", s->ngen / (s->t_roll > 0 ? s->t_roll : 1e-9),
                           "reference_score_tokens_per_s", (double)o->seqs * np * (ps[0].n + o->tokens) / (s->t_score > 0 ? s->t_score : 1e-9),
                           "tokens_stored", (json_int_t)n);
    json_object_set_new(meta, "throughput", th);
    json_object_set_new(meta, "summary", json_pack("{s:f,s:f,s:f}", "mean_delta", n ? s->d / n : 0,
                                                   "mean_abs_delta", n ? s->ad / n : 0, "mean_k3", n ? s->k3 / n : 0));
    /* the trainer's entropy has no rl_token column: its mean is kept here */
    qs_json_set_num(json_object_get(meta, "summary"), "mean_entropy_rollout", n ? s->er / n : 0);
    qs_json_set_num(json_object_get(meta, "summary"), "mean_entropy_train", n ? s->et / n : 0);
    if (o->arith) {
        qs_json_set_num(json_object_get(meta, "summary"), "mean_reward", s->reward / ((double)np * o->seqs));
        json_object_set_new(meta, "task", json_string("arith: chat prompt 'What is A + B?' (A, B in 1..9 from the seed); "
                            "reward 1 if the completion contains A+B as a whole number, else 0; advantage = reward - "
                            "mean reward of the prompt's group"));
    }
}

static void score_print(const llm_opts *o, const char *runname, int64_t run, const prompt_t *ps, int np, const score_sums *s)
{
    const long n = s->ntok;
    const double rollr = s->ngen / (s->t_roll > 0 ? s->t_roll : 1e-9);
    const double scorer = (double)o->seqs * np * (ps[0].n + o->tokens) / (s->t_score > 0 ? s->t_score : 1e-9);
    if (o->json) {
        json_t *out = json_object();
        qs_json_set_text(out, "run", runname);
        json_object_set_new(out, "run_id", json_integer((json_int_t)run));
        json_object_set_new(out, "tokens", json_integer((json_int_t)n));
        qs_json_add_nums(out, "mean_delta", n ? s->d / n : 0.0, "mean_abs_delta", n ? s->ad / n : 0.0,
                         "mean_k3", n ? s->k3 / n : 0.0, "rollout_tokens_per_s", rollr, "score_tokens_per_s", scorer,
                         (char *)NULL);
        if (out && o->arith) qs_json_set_num(out, "mean_reward", s->reward / ((double)np * o->seqs));
        char *txt = out ? json_dumps(out, JSON_COMPACT) : NULL;
        if (txt) printf("%s\n", txt);
        free(txt);
        json_decref(out);
    } else {
        printf("run %s (id %lld): %ld tokens, %d prompts x %d sequences\n", qs_esc(runname), (long long)run, n, np, o->seqs);
        printf("  delta = lp_train - lp_rollout: mean %.4g, mean |delta| %.4g, mean k3 %.4g (nats/token)\n",
               n ? s->d / n : 0, n ? s->ad / n : 0, n ? s->k3 / n : 0);
        if (o->arith) printf("  task arith: mean reward %.3f\n", s->reward / ((double)np * o->seqs));
        printf("  rollout sampling %.1f tokens/s, reference scoring %.1f tokens/s\n", rollr, scorer);
    }
}

/* The model work, then the run written in one short transaction. */
static int score_run(qs_db *db, const llm_opts *o, const qs_llm_file *f, const qs_llm_model *roll, const prompt_t *ps, int np,
                     const char *runname)
{
    qs_err e = {{0}};
    int rc = 0;
    double *lpt = malloc((size_t)o->seqs * o->tokens * sizeof(double)), *entt = malloc((size_t)o->seqs * o->tokens * sizeof(double));
    score_sums s = {0};
    int64_t run = 0;
    tokbuf tb = {NULL, 0, 0};
    if (!lpt || !entt) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    {   /* refuse a taken name before the model work, not after it */
        int taken;
        if (qs_run_exists(db, runname, &taken, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto done; }
        if (taken) { rc = qs_cli_error(QS_EXIT_ERR, "a run named '%s' already exists (choose another --name)", runname); goto done; }
    }
    json_t *meta = score_meta(o, f, ps, np);
    int bad = score_prompts(o, f, roll, ps, np, lpt, entt, &tb, &s, &e);
    if (!bad) {
        score_meta_finish(meta, o, ps, np, &s);
        char *ms = json_dumps(meta, JSON_COMPACT);
        bad = !ms || qs_db_begin(db, &e) || write_run(db, runname, o->model, ms, &tb, &run, &e) || qs_db_commit(db, &e);
        free(ms);
    }
    json_decref(meta);
    if (bad) {
        if (!e.msg[0]) qs_fail(&e, "out of memory");
        qs_db_rollback(db);
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto done;
    }
    score_print(o, runname, run, ps, np, &s);
done:
    free(tb.r);
    free(lpt); free(entt);
    return rc;
}

static int cmd_score(qs_cli *cli, int argc, char **argv)
{
    llm_opts o;
    int rc = parse_opts("llm score", argc, argv, &o);
    if (rc) return rc;
    if (!o.has_w && !o.has_a && !o.has_kv)
        fprintf(stderr, "qscope: note: rollout and reference numerics are identical (all fp32): lp_rollout = lp_train\n");
    qs_err e = {{0}};
    qs_llm_file f;
    qs_llm_model roll;
    memset(&roll, 0, sizeof roll);
    char *runname = NULL;
    prompt_t *ps = calloc((size_t)o.prompts, sizeof *ps);
    if (!ps) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    if (load_models(&o, &f, &roll, 1, &e)) { free(ps); return qs_cli_err(QS_EXIT_ERR, &e); }
    int np = o.prompts;
    if (get_prompts(&o, &f, ps, np, &e)) { rc = qs_cli_err(QS_EXIT_USAGE, &e); goto done; }
    for (int i = 0; i < np; i++)
        if (ps[i].n + o.tokens > f.m.c.ctx) { rc = qs_cli_error(QS_EXIT_USAGE, "prompt + --tokens exceed the model context %d", f.m.c.ctx); goto done; }
    if (!(runname = score_run_name(&o))) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    qs_db *db = qs_cli_open_db(cli);
    if (!db) { rc = QS_EXIT_ERR; goto done; }
    rc = score_run(db, &o, &f, &roll, ps, np, runname);
    qs_db_close(db);
done:
    if (roll.arena && roll.arena != f.m.arena) qs_llm_free(&roll);
    qs_llm_file_free(&f);
    free(ps);
    free(runname);
    return rc;
}

/* ---------------------------------------------------------------- capture */

typedef struct cap_ctx {
    int n_layer, rows_total;
    float *buf[4096][QS_SITE_COUNT];
    int cols[QS_SITE_COUNT];
    int ok;
} cap_ctx;

static void cap_tap(void *ctx, int layer, qs_llm_site site, const float *x, int rows, int cols)
{
    cap_ctx *c = ctx;
    if (!c->ok || rows != c->rows_total || !c->cols[site] || cols != c->cols[site]) return;
    float *b = malloc((size_t)rows * cols * sizeof(float));
    if (!b) { c->ok = 0; return; }
    memcpy(b, x, (size_t)rows * cols * sizeof(float));
    free(c->buf[layer][site]);
    c->buf[layer][site] = b;
}

typedef struct { const float *p; } fillp;
static int fill_mem(void *ctx, uint64_t start, size_t n, float *out)
{
    memcpy(out, ((fillp *)ctx)->p + start, n * sizeof(float));
    return 0;
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Per-channel absmax, the median channel absmax and the top channels. */
static json_t *outlier_json(const float *x, int rows, int cols, double *ratio)
{
    float *am = calloc((size_t)cols, sizeof(float)), *srt = malloc((size_t)cols * sizeof(float));
    json_t *j = json_object();
    if (!am || !srt) { free(am); free(srt); *ratio = 0; return j; }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) { float v = fabsf(x[(size_t)r * cols + c]); if (v > am[c]) am[c] = v; }
    memcpy(srt, am, (size_t)cols * sizeof(float));
    qsort(srt, (size_t)cols, sizeof(float), cmp_desc);
    double med = srt[cols / 2];
    json_t *top = json_array();
    for (int k = 0; k < 8 && k < cols; k++) {
        int best = -1;
        for (int c = 0; c < cols; c++) {
            if (best >= 0 && am[c] <= am[best]) continue;
            int used = 0;
            for (size_t q = 0; q < json_array_size(top); q++)
                if (json_integer_value(json_object_get(json_array_get(top, q), "channel")) == c) used = 1;
            if (!used) best = c;
        }
        if (best < 0) break;
        json_array_append_new(top, json_pack("{s:i,s:f,s:f}", "channel", best, "absmax", (double)am[best],
                                             "x_median", med > 0 ? am[best] / med : 0.0));
    }
    *ratio = med > 0 ? srt[0] / med : 0;
    qs_json_set_num(j, "median_channel_absmax", med);
    json_object_set_new(j, "top_channels", top);
    int nout = 0;
    for (int c = 0; c < cols; c++) if (med > 0 && am[c] > 20 * med) nout++;
    json_object_set_new(j, "channels_over_20x_median", json_integer(nout));
    free(am); free(srt);
    return j;
}

static int cmd_capture(qs_cli *cli, int argc, char **argv)
{
    llm_opts o;
    int rc = parse_opts("llm capture", argc, argv, &o);
    if (rc) return rc;
    if (o.has_w || o.has_a || o.has_kv) return qs_cli_usage("llm capture", "capture records the FP32 reference; drop the format options");
    qs_err e = {{0}};
    qs_llm_file f;
    if (load_models(&o, &f, NULL, 0, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    if (f.m.c.n_layer > 4096) { qs_llm_file_free(&f); return qs_cli_error(QS_EXIT_ERR, "too many layers"); }
    prompt_t p;
    if (get_prompts(&o, &f, &p, 1, &e)) { qs_llm_file_free(&f); return qs_cli_err(QS_EXIT_USAGE, &e); }
    const char *prefix = o.prefix ? o.prefix : "llm-act";
    /* the token sequence: the prompt and a continuation sampled from the reference at temperature 1 */
    rollout ro;
    memset(&ro, 0, sizeof ro);
    double tr;
    cap_ctx *cc = calloc(1, sizeof *cc);
    float *hid = NULL;
    qs_llm_state *s = NULL;
    qs_db *db = NULL;
    json_t *rep = json_array();
    if (!cc) { qs_llm_file_free(&f); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    if (p.n + o.tokens > f.m.c.ctx) { rc = qs_cli_error(QS_EXIT_USAGE, "prompt + --tokens exceed the model context %d", f.m.c.ctx); goto out; }
    if (llm_rollout(&f.m, NULL, &p, 1, o.tokens, -1, o.seed, 0, NULL, &ro, &tr, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    const int L = p.n + o.tokens, d = f.m.c.dim;
    cc->n_layer = f.m.c.n_layer; cc->rows_total = L; cc->ok = 1;
    cc->cols[QS_SITE_ATTN_IN] = cc->cols[QS_SITE_FFN_IN] = d;
    cc->cols[QS_SITE_ATTN_OUT] = (int)qs_llm_q_dim(&f.m.c);   /* n_head x head_dim, may differ from dim */
    cc->cols[QS_SITE_FFN_DOWN_IN] = f.m.c.ffn;
    if (o.all_sites) {
        cc->cols[QS_SITE_K] = cc->cols[QS_SITE_V] = f.m.c.n_kv_head * f.m.c.head_dim;
        cc->cols[QS_SITE_RESID] = d;
    }   /* cols 0: the site is not captured */
    hid = malloc((size_t)L * d * sizeof(float));
    s = qs_llm_state_new(&f.m.c, 1, L, L, &e);
    if (!hid || !s) { if (!hid) qs_fail(&e, "out of memory"); rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    if (qs_llm_forward(&f.m, NULL, s, ro.tok, 1, L, 0, hid, cap_tap, cc, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    if (!cc->ok) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory while capturing"); goto out; }
    db = qs_cli_open_db(cli);
    if (!db) { rc = QS_EXIT_ERR; goto out; }
    if (qs_db_begin(db, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    json_t *ids = json_array();
    for (int i = 0; i < L; i++) json_array_append_new(ids, json_integer(ro.tok[i]));
    printf("%-36s %10s %12s %14s\n", "tensor", "shape", "absmax", "max/median ch");
    for (int l = 0; l < f.m.c.n_layer && rc == 0; l++)
        for (int si = 0; si < QS_SITE_COUNT; si++) {
            const float *x = cc->buf[l][si];
            if (!x) continue;
            int cols = cc->cols[si];
            /* whole, never cut: a cut name or source would merge two captures into one row */
            char *name = NULL, *src = NULL;
            if (asprintf(&name, "%s:blk.%d.%s", prefix, l, qs_llm_site_name((qs_llm_site)si)) < 0) name = NULL;
            if (!name || asprintf(&src, "llm:%s#%s", o.model, name) < 0) {   /* one source per tensor: re-capturing replaces only it */
                free(name);
                rc = qs_cli_error(QS_EXIT_ERR, "out of memory");
                break;
            }
            double ratio;
            json_t *m = json_object();
            json_object_set_new(m, "generator", json_string("qscope llm capture"));
            json_object_set_new(m, "tool_version", json_string(QS_VERSION));
            json_object_set_new(m, "model", qs_llm_model_json(o.model, &f));
            json_object_set_new(m, "layer", json_integer(l));
            json_object_set_new(m, "site", json_string(qs_llm_site_name((qs_llm_site)si)));
            json_object_set_new(m, "layout", json_string("tokens x channels (rows = positions 0..T-1 of one sequence)"));
            json_object_set_new(m, "token_ids", json_deep_copy(ids));
            json_object_set_new(m, "prompt_tokens", json_integer(p.n));
            json_object_set_new(m, "seed", json_integer((json_int_t)o.seed));
            json_object_set_new(m, "outliers", outlier_json(x, L, cols, &ratio));
            char *ms = json_dumps(m, JSON_COMPACT);
            json_decref(m);
            uint64_t shape[2] = {(uint64_t)L, (uint64_t)cols};
            fillp fp = {x};
            float amax = 0;
            for (size_t i = 0; i < (size_t)L * cols; i++) if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
            if (qs_import_f32(db, name, shape, 2, fill_mem, &fp, src, "llm-capture", ms, rep, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
            else printf("%-36s %5dx%-4d %12.4g %14.1f\n", qs_esc(name), L, cols, amax, ratio);
            free(ms);
            free(name);
            free(src);
        }
    json_decref(ids);
    if (rc == 0 && qs_db_commit(db, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
    if (rc) qs_db_rollback(db);
    else fprintf(stderr, "qscope: stored %zu activation tensors (%d tokens) under %s:*\n", json_array_size(rep), L, qs_esc(prefix));
out:
    json_decref(rep);
    if (db) qs_db_close(db);
    qs_llm_state_free(s);
    free(hid);
    for (int l = 0; l < cc->n_layer; l++)
        for (int si = 0; si < QS_SITE_COUNT; si++) free(cc->buf[l][si]);
    free(cc);
    llm_rollout_free(&ro);
    qs_llm_file_free(&f);
    return rc;
}

/* ---------------------------------------------------------------- generate, logits, bench */

static int cmd_generate(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    llm_opts o;
    int rc = parse_opts("llm generate", argc, argv, &o);
    if (rc) return rc;
    qs_err e = {{0}};
    qs_llm_file f;
    qs_llm_model roll;
    memset(&roll, 0, sizeof roll);
    if (load_models(&o, &f, &roll, 1, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    prompt_t p;
    rollout ro;
    memset(&ro, 0, sizeof ro);
    double tr;
    if (get_prompts(&o, &f, &p, 1, &e)) { rc = qs_cli_err(QS_EXIT_USAGE, &e); goto out; }
    qs_llm_numerics nx = {o.has_a ? &o.a : NULL, o.resq, o.has_kv ? &o.kv : NULL, o.scaled, NULL, NULL};
    if (p.n + o.tokens > f.m.c.ctx) { rc = qs_cli_error(QS_EXIT_USAGE, "prompt + --tokens exceed the model context"); goto out; }
    sampler sp = {o.temp, o.top_p, o.top_k, o.greedy};
    if (llm_rollout(&roll, &nx, &p, o.seqs, o.tokens, f.v.eos, o.seed, 0, o.filtered ? &sp : NULL, &ro, &tr, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    for (int b = 0; b < ro.B; b++) {
        /* the whole sequence's bytes first: a character may span tokens, and escaping needs it whole */
        char *txt = malloc((size_t)ro.len[b] * 512 + 1);
        size_t n = 0;
        double sum = 0;
        if (!txt) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto out; }
        printf("--- sequence %d (prompt %s)\n", b, qs_esc(p.label));
        for (int t = 0; t < ro.len[b]; t++) {
            n += qs_llm_detok(&f.v, ro.tok[(size_t)b * (p.n + o.tokens) + p.n + t], txt + n, 512);
            sum += ro.lp[(size_t)b * o.tokens + t];
        }
        qs_put_text(stdout, txt, n);
        free(txt);
        printf("\n--- %d tokens, mean log-prob %.3f\n", ro.len[b], ro.len[b] ? sum / ro.len[b] : 0);
    }
    if (o.greedy || o.temp == 0) fprintf(stderr, "qscope: sampling: greedy (argmax)\n");
    else fprintf(stderr, "qscope: sampling: temperature %g, top-k %d (0 = off), top-p %g; log-probs are the model's (temperature 1, unfiltered)\n",
                 o.temp, o.top_k, o.top_p);
    fprintf(stderr, "qscope: %.1f tokens/s (%d sequences in lockstep)\n", (double)ro.B * o.tokens / (tr > 0 ? tr : 1e-9), ro.B);
out:
    llm_rollout_free(&ro);
    if (roll.arena && roll.arena != f.m.arena) qs_llm_free(&roll);
    qs_llm_file_free(&f);
    return rc;
}

typedef struct { const float *p; } lgfill;
static int cmd_logits(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    llm_opts o;
    int rc = parse_opts("llm logits", argc, argv, &o);
    if (rc) return rc;
    if ((!o.prompt_ids && !o.prompt_text) || !o.out) return qs_cli_usage("llm logits", "--prompt-ids LIST (or --prompt TEXT) and -o OUT.npy are required");
    qs_err e = {{0}};
    qs_llm_file f;
    qs_llm_model roll;
    memset(&roll, 0, sizeof roll);
    if (load_models(&o, &f, &roll, 1, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    prompt_t p;
    float *hid = NULL, *scr = NULL, *lg = NULL;
    qs_llm_state *s = NULL;
    if (get_prompts(&o, &f, &p, 1, &e)) { rc = qs_cli_err(QS_EXIT_USAGE, &e); goto out; }
    if (p.n > f.m.c.ctx) { rc = qs_cli_error(QS_EXIT_USAGE, "more ids than the model context"); goto out; }
    qs_llm_numerics nx = {o.has_a ? &o.a : NULL, o.resq, o.has_kv ? &o.kv : NULL, o.scaled, NULL, NULL};
    const int d = f.m.c.dim, V = f.m.c.vocab;
    hid = malloc((size_t)p.n * d * sizeof(float));
    scr = malloc((size_t)p.n * d * sizeof(float));
    lg = malloc((size_t)p.n * V * sizeof(float));
    s = qs_llm_state_new(&f.m.c, 1, p.n, p.n, &e);
    if (!hid || !scr || !lg || !s) { if (s) qs_fail(&e, "out of memory"); rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    if (qs_llm_forward(&roll, &nx, s, p.ids, 1, p.n, 0, hid, NULL, NULL, &e) || qs_llm_logits(&roll, &nx, hid, p.n, scr, lg, &e)) {
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto out;
    }
    uint64_t shape[2] = {(uint64_t)p.n, (uint64_t)V};
    fillp fp = {lg};
    if (qs_npy_write_f32(o.out, shape, 2, fill_mem, &fp, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
out:
    qs_llm_state_free(s);
    free(hid); free(scr); free(lg);
    if (roll.arena && roll.arena != f.m.arena) qs_llm_free(&roll);
    qs_llm_file_free(&f);
    return rc;
}

/* Throughput: batched sampling (B sequences in lockstep, KV cache) and teacher-forced scoring, for
** the reference and for the rollout numerics given on the command line. */
static int cmd_bench(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    llm_opts o;
    int rc = parse_opts("llm bench", argc, argv, &o);
    if (rc) return rc;
    qs_err e = {{0}};
    qs_llm_file f;
    qs_llm_model roll;
    memset(&roll, 0, sizeof roll);
    if (load_models(&o, &f, &roll, 1, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    prompt_t p;
    default_prompts(&f, &p, 1);
    qs_llm_numerics nx = {o.has_a ? &o.a : NULL, o.resq, o.has_kv ? &o.kv : NULL, o.scaled, NULL, NULL};
    /* the warm-up scores 8 tokens per sequence: room for whichever is longer */
    const size_t nlp = (size_t)o.seqs * (o.tokens > 8 ? o.tokens : 8);
    double *lp = malloc(nlp * sizeof(double)), *en = malloc(nlp * sizeof(double));
    if (!lp || !en) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto out; }
    printf("model %s: %.3g GFLOP/token at context %d; %d sequences x %d tokens, best of %d\n", qs_llm_title(&f), qs_llm_flops_per_token(&f.m.c, o.tokens / 2) * 1e-9,
           o.tokens / 2, o.seqs, o.tokens, o.reps);
    printf("%-44s %14s %14s\n", "numerics", "sample tok/s", "score tok/s");
    {   /* warm-up (page faults of fresh buffers, OpenBLAS threads), not timed */
        rollout w;
        memset(&w, 0, sizeof w);
        double tw;
        int bad = llm_rollout(&f.m, NULL, &p, o.seqs, 8, -1, o.seed, 1, NULL, &w, &tw, &e) || llm_score_tokens(&f.m, NULL, &w, lp, en, &tw, &e);
        llm_rollout_free(&w);
        if (bad) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out; }
    }
    for (int pass = 0; pass < 2; pass++) {
        const qs_llm_model *m = pass ? &roll : &f.m;
        const qs_llm_numerics *n = pass ? &nx : NULL;
        double best_s = 0, best_c = 0;
        for (int rep = 0; rep < o.reps; rep++) {   /* best of --reps: the machine is shared */
            rollout ro;
            memset(&ro, 0, sizeof ro);
            double tr = 0, ts = 0;
            if (llm_rollout(m, n, &p, o.seqs, o.tokens, -1, o.seed, 0, NULL, &ro, &tr, &e) || llm_score_tokens(m, n, &ro, lp, en, &ts, &e)) {
                llm_rollout_free(&ro);
                rc = qs_cli_err(QS_EXIT_ERR, &e);
                goto out;
            }
            double vs = (double)o.seqs * o.tokens / tr, vc = (double)o.seqs * (p.n + o.tokens) / ts;
            if (vs > best_s) best_s = vs;
            if (vc > best_c) best_c = vc;
            llm_rollout_free(&ro);
        }
        char lab[160];
        if (pass) snprintf(lab, sizeof lab, "w=%s a=%s kv=%s%s", o.wspec, o.aspec, o.kvspec, o.resq ? " +resq" : "");
        else snprintf(lab, sizeof lab, "reference fp32");
        printf("%-44s %14.1f %14.1f\n", lab, best_s, best_c);
    }
    if (o.eval_ctx < 0) o.eval_ctx = f.m.c.ctx < 512 ? f.m.c.ctx : 512;
    if (o.eval_ctx > 0) {   /* the llm eval case: reference + this run's numerics, chunks of eval_ctx */
        if (o.eval_ctx > f.m.c.ctx) { rc = qs_cli_usage("llm bench", "--eval-ctx %d exceeds the model context %d", o.eval_ctx, f.m.c.ctx); goto out; }
        qs_eval_variant var = {&roll, nx, 0};
        char lab[160];
        snprintf(lab, sizeof lab, "w=%s a=%s kv=%s%s", o.wspec, o.aspec, o.kvspec, o.resq ? " +resq" : "");
        if (qs_llm_eval_bench(&f.m, (o.has_w || o.has_a || o.has_kv) ? &var : NULL, lab, o.eval_ctx, o.eval_chunks, &e)) {
            rc = qs_cli_err(QS_EXIT_ERR, &e);
            goto out;
        }
    }
out:
    free(lp); free(en);
    if (roll.arena && roll.arena != f.m.arena) qs_llm_free(&roll);
    qs_llm_file_free(&f);
    return rc;
}

/* The subcommands of `qscope llm`: dispatch, `qscope help llm` and the usage errors come from here. */
const qs_subcommand qs_llm_subcommands[] = {
    {"score",
     "sample --seqs continuations of --tokens tokens per prompt with the rollout numerics\n"
     "            (temperature 1, no top-k/p, --seed), re-score them with the FP32 reference and store\n"
     "            per-token (lp_rollout, lp_train) as an rl_run labelled 'precision mismatch without\n"
     "            training' (step = prompt, seq = sample, pos = generated-token index)\n",
     cmd_score, 0, QS_LLM_SCORE_ARGS, QS_LLM_SCORE_OPTS},
    {"capture",
     "store the inputs of every linear layer (attn_in, attn_out, ffn_in, ffn_down_in) of\n"
     "            one sampled sequence as tensors PREFIX:blk.L.SITE (tokens x channels) with outlier\n"
     "            channels in the metadata; --sites all adds k, v (cache entries) and resid\n",
     cmd_capture, 0, QS_LLM_CAPTURE_ARGS, QS_LLM_CAPTURE_OPTS},
    {"generate",
     "print sampled text (detokenized from the GGUF vocabulary); --temp T (0 = greedy),\n"
     "            --top-k K, --top-p P, --greedy\n",
     cmd_generate, 0, QS_LLM_GENERATE_ARGS, QS_LLM_GENERATE_OPTS},
    {"logits",
     "write the logits of --prompt-ids to -o OUT.npy (cross-checks)\n",
     cmd_logits, 0, QS_LLM_LOGITS_ARGS, QS_LLM_LOGITS_OPTS},
    {"bench",
     "tokens/s of batched sampling and teacher-forced scoring, reference vs rollout\n"
     "            (best of --reps N, default 3), then the eval case: tokens/s and % of SGEMM\n"
     "            (--eval-ctx N, default 512; --eval-chunks K, default 2; --eval-ctx 0 skips it)\n",
     cmd_bench, 0, QS_LLM_BENCH_ARGS, QS_LLM_BENCH_OPTS},
    {"tokenize",
     "the token ids of --prompt TEXT or --text FILE (- = stdin) under --model's tokenizer\n"
     "            or --tokenizer PATH alone; LoPT on --threads N (default all cores; 1 = the\n"
     "            sequential tokenizer, same ids); --json with byte and character offsets; --npy FILE\n",
     qs_cmd_llm_tokenize, 0, QS_LLM_TOKENIZE_ARGS, QS_LLM_TOKENIZE_OPTS},
    {"text",
     "--rdb Rdata.rdb [--rdx Rdata.rdx] -o DIR [--json]: write each character vector of\n"
     "            an R data package (Jane Austen's novels, r-cran-janeaustenr) as DIR/NAME.txt,\n"
     "            lines joined into paragraphs; `make data` writes data/text/ (default evaluation\n"
     "            text: data/text/persuasion.txt)\n",
     qs_cmd_llm_text, 0, QS_LLM_TEXT_ARGS, QS_LLM_TEXT_OPTS},
    {"imatrix",
     "--model PATH --text FILE -o FILE: llama.cpp's importance matrix (per weight, the sum\n"
     "            of squared input activations per column and the token count) from qscope's\n"
     "            forward pass, written as llama-imatrix's GGUF or legacy .dat (--format gguf|dat);\n"
     "            --show FILE lists either; use it as w=F:imatrix=FILE or llama-quantize --imatrix\n",
     qs_cmd_llm_imatrix, 0, QS_LLM_IMATRIX_ARGS, QS_LLM_IMATRIX_OPTS},
    {"eval",
     "perplexity of --text FILE (default data/text/persuasion.txt) under the FP32 reference\n"
     "            and each --config w=F,a=F,kv=F,resq=M: KL to the reference per token (mean, median,\n"
     "            p90, p99, max), same top token, RMS dp, dPPL with a 95% interval; llama.cpp's chunks\n"
     "            (--ctx N, default 512; --chunks K) and second-half scoring (--score half|all);\n"
     "            stored per variant and chunk as each finishes: Ctrl-C keeps them, the same command\n"
     "            (or a larger --chunks) goes on; --until-ci; --ci bootstrap; --paired; --csv; --json;\n"
     "            --plan FILE: a plan of `llm sensitivity --formats` as a configuration\n",
     qs_cmd_llm_eval, 1, QS_LLM_EVAL_ARGS, QS_LLM_EVAL_OPTS},
    {"sensitivity",
     "--format F [--sites attn_in,attn_out,ffn_in,ffn_down_in,kv,w]: one (layer, site)\n"
     "            at F at a time, all else FP32: mean KL and dPPL per layer x site (eval's chunks and\n"
     "            scoring); a greedy BF16 plan by KL per extra bit for --kl-target X or --bits-budget B\n"
     "            (average bits), verified by an eval of the combined plan and refined (more cells)\n"
     "            while the measured KL misses X; stored; --json; --csv; --force; --formats F1,F2,...\n"
     "            --bits B: a plan across formats (weights included) written as a file for eval --plan\n",
     qs_cmd_llm_sens, 1, QS_LLM_SENS_ARGS, QS_LLM_SENS_OPTS},
    {NULL, NULL, NULL, 0, NULL, NULL},
};
