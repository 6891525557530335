/*
** `qscope train`: train a small Llama-architecture model in FP32 (issue 26, second part) from scratch
** or from --init MODEL, on byte-level or a model's tokens, and write a Hugging Face checkpoint that
** `llm eval/generate/logits --model DIR` load.  The work is analysis/train_service.h (loop:
** train_loop.h; optimizer: kernels/llm_adamw.h; writer: store/llm_save_hf.h).  --recipe NAME and --op
** OPERAND=FORMAT pick the GEMMs' low-precision recipe (kernels/llm_recipe.h).  Every run is stored in
** the database unless --no-store (train_record.h).  --out DIR with --checkpoint-every N writes
** checkpoints that survive a kill and --resume DIR continues one (store/train_ckpt.h).  --sweep SPEC
** runs one run per (recipe, seed) of analysis/train_sweep.h, one after the other, each through the
** same path as a single run (run_job).
*/
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "par.h"
#include "quant_opts.h"
#include "train_par.h"
#include "train_cli.h"
#include "train_plan.h"
#include "train_recipe_file.h"
#include "train_record.h"
#include "../../analysis/train_service.h"
#include "../../analysis/train_sweep.h"
#include "../../store/json_out.h"
#include "../../store/llm_load.h"

#define CMD "train"
#define MAX_TEXTS 256
#define DEFAULT_TEXT_DIR QS_TRAIN_TEXT_DIR
#define MAX_OPS 64

typedef struct opts {
    const char *tokenizer, *init, *out, *val_text, *text[MAX_TEXTS], *resume, *sweep;
    int in_sweep;                /* a run of a sweep: no per-step lines, no per-run output */
    qs_train_capture *cap;       /* a sweep's run on an MPI rank: recorded here, stored by rank 0 */
    int ntext, json, layers, dim, heads, kv_heads, ffn, ckpt_every;
    unsigned char given[128];    /* options given on the command line, by getopt letter */
    qs_train_state st;           /* --resume: the checkpoint's trainer_state.json */
    qs_train_opts t;
    const char *recipe_name, *ops[MAX_OPS];   /* --recipe, --op in order */
    const char *recipe_file;     /* --recipe-file: expanded into recipe_name and the first ops */
    qs_recipe_file rf;
    int is_plan;                 /* --recipe-file is a per-layer plan (train_plan.h) */
    qs_plan_file plan;
    qs_llm_recipe *per;          /* its per-linear recipes */
    size_t nper;
    char plan_recipe[24];        /* "plan@HASH12": the run's recipe name */
    int nops;
    qs_llm_recipe recipe;
    qs_train_grad_req grad;   /* --grad-out, --batch-out, --operand-out (analysis/train_grad.h) */
    char dflt[MAX_TEXTS][300];   /* default training texts */
    int csv, no_store;
    const char *name;            /* --name */
    char labels[QS_OP_COUNT][160];
    qs_trec rec;                 /* the recording (train_record.h) */
} opts;

static int parse_pos_f64(const char *opt, const char *s, double lo, double hi, double *out)
{
    if (qs_parse_f64(s, out) || !(*out >= lo && *out <= hi))
        return qs_cli_usage(CMD, "%s wants a number in %g..%g, not '%s'", opt, lo, hi, s);
    return 0;
}

/* --recipe-file FILE (train_recipe_file.h): its base preset as --recipe, its slots as --op before
** the command line's. */
static int recipe_file(opts *o)
{
    int rc = qs_recipe_file_read(CMD, o->recipe_file, &o->rf);
    if (rc) return rc;
    if (o->rf.plan) {   /* a per-layer plan: --recipe BASE and --op give the backward slots */
        for (int i = 0; i < o->nops; i++)
            if (!strncmp(o->ops[i], "fwd.", 4))
                return qs_cli_usage(CMD, "--op %s: the plan %s sets fwd.x and fwd.w per layer; --op may set the backward "
                                         "slots", o->ops[i], o->recipe_file);
        if ((rc = qs_plan_file_read(CMD, o->recipe_file, &o->plan))) return rc;
        o->is_plan = 1;
        snprintf(o->plan_recipe, sizeof o->plan_recipe, "plan@%.12s", o->plan.hash);
        return 0;
    }
    if (o->recipe_name) return qs_cli_usage(CMD, "--recipe-file names its base preset (\"base\"): drop --recipe");
    if (o->nops + o->rf.nop > MAX_OPS) return qs_cli_usage(CMD, "more than %d --op settings", MAX_OPS);
    memmove(o->ops + o->rf.nop, o->ops, (size_t)o->nops * sizeof *o->ops);
    for (int i = 0; i < o->rf.nop; i++) o->ops[i] = o->rf.op[i];
    o->nops += o->rf.nop;
    if (o->rf.base[0]) o->recipe_name = o->rf.base;
    return 0;
}

static int parse(qs_cli *cli, int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"tokenizer", 1, 0, 'k'}, {"init", 1, 0, 'i'}, {"out", 1, 0, 'o'}, {"text", 1, 0, 'x'}, {"val-text", 1, 0, 'v'},
        {"layers", 1, 0, 'L'}, {"dim", 1, 0, 'd'}, {"heads", 1, 0, 'H'}, {"kv-heads", 1, 0, 'K'}, {"ffn", 1, 0, 'f'},
        {"ctx", 1, 0, 'c'}, {"batch", 1, 0, 'b'}, {"steps", 1, 0, 'n'}, {"lr", 1, 0, 'l'}, {"warmup", 1, 0, 'w'},
        {"min-lr", 1, 0, 'm'}, {"wd", 1, 0, 'W'}, {"clip", 1, 0, 'C'}, {"accum", 1, 0, 'a'}, {"eval-every", 1, 0, 'e'},
        {"val-seqs", 1, 0, 'V'}, {"seed", 1, 0, 's'}, {"json", 0, 0, 'j'}, {"recipe", 1, 0, 'R'}, {"op", 1, 0, 'O'},
        {"grad-out", 1, 0, 'G'}, {"batch-out", 1, 0, 'B'}, {"operand-out", 1, 0, 'P'}, {"name", 1, 0, 'N'},
        {"db", 1, 0, 'D'}, {"no-store", 0, 0, 'X'}, {"csv", 0, 0, 'S'},
        {"checkpoint-every", 1, 0, 'E'}, {"resume", 1, 0, 'r'}, {"sweep", 1, 0, 'Z'}, {"recipe-file", 1, 0, 'Y'},
        {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        int rc = 0;
        if (c > 0 && c < 128) o->given[c] = 1;
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
        case 'n': rc = qs_cli_parse_int(CMD, "--steps", optarg, 0, 1 << 24, &o->t.steps); break;
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
        case 'E': rc = qs_cli_parse_int(CMD, "--checkpoint-every", optarg, 0, 1 << 24, &o->ckpt_every); break;
        case 'r': o->resume = optarg; break;
        case 'Z': o->sweep = optarg; break;
        case 'S': o->csv = 1; break;
        case 'X': o->no_store = 1; break;
        case 'D': cli->db_path = optarg; break;   /* as the global --db */
        case 'N':
            if (!*optarg) return qs_cli_usage(CMD, "--name wants a name");
            o->name = optarg;
            break;
        case 'G': o->grad.grad_out = optarg; break;
        case 'B': o->grad.batch_out = optarg; break;
        case 'P': o->grad.operand_out = optarg; break;
        case 'R':
            if (o->recipe_name) return qs_cli_usage(CMD, "--recipe given twice");
            o->recipe_name = optarg;
            break;
        case 'Y': o->recipe_file = optarg; break;
        case 'O':
            if (o->nops == MAX_OPS) return qs_cli_usage(CMD, "more than %d --op settings", MAX_OPS);
            o->ops[o->nops++] = optarg;
            break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
        if (rc) return rc;
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->recipe_file) {
        int rc = recipe_file(o);
        if (rc) return rc;
    }
    if (o->json && o->csv) return qs_cli_usage(CMD, "--json and --csv: give one");
    if (o->name && o->no_store) return qs_cli_usage(CMD, "--name names the stored run; drop it with --no-store");
    if (o->grad.operand_out && !o->recipe_name && !o->nops && !o->is_plan)
        return qs_cli_usage(CMD, "--operand-out needs a recipe (--recipe or --op)");
    if (o->init && (o->layers || o->dim || o->heads || o->kv_heads || o->ffn))
        return qs_cli_usage(CMD, "--init takes the model's shape; drop --layers/--dim/--heads/--kv-heads/--ffn");
    if (o->resume && o->init) return qs_cli_usage(CMD, "--resume takes the model from its checkpoint; drop --init");
    if (o->ckpt_every && !o->out && !o->resume) return qs_cli_usage(CMD, "--checkpoint-every needs --out DIR");
    if (o->sweep && (o->recipe_name || o->nops || o->is_plan || o->out || o->init || o->name || o->csv || o->resume || o->ckpt_every ||
                     o->grad.grad_out || o->grad.batch_out || o->grad.operand_out))
        return qs_cli_usage(CMD, "--sweep sets the recipe, seed and name of each run; drop --recipe/--op/--out/--init/"
                                 "--name/--csv/--resume/--checkpoint-every and the cross-check outputs");
    return 0;
}
/* A new model's shape: the options given, the default model (train_sweep.h) for the rest. */
static void fill_shape(opts *o)
{
    qs_train_shape d;
    qs_train_opts t;
    qs_train_defaults(&d, &t);
    if (o->init) return;
    if (!o->layers) o->layers = d.layers;
    if (!o->dim) o->dim = d.dim;
    if (!o->heads) o->heads = d.heads;
    if (!o->kv_heads) o->kv_heads = o->heads;
    if (!o->ffn) o->ffn = 4 * o->dim;
}



/* Paths a and b name the same file (both resolve to one path), or are equal strings. */
static int same_path(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = !strcmp(ra ? ra : a, rb ? rb : b);
    free(ra);
    free(rb);
    return same;
}

/* x with the fewest digits that read back as x ("0.003", not "0.0030000000000000001"). */
static const char *shortest(double x, char *buf, size_t cap)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

#define KEEP_MSG "a resumed run may change only --steps, --eval-every, --checkpoint-every, --out and --json"

/* The first option given on the command line that differs from the checkpoint's, as "--x V (checkpoint W)". */
static int conflict(const opts *o, const qs_train_state *s, char *buf, size_t cap)
{
    const unsigned char *g = o->given;
#define INT_OPT(ch, name, cli, ck) if (g[ch] && (long long)(cli) != (long long)(ck)) \
        return snprintf(buf, cap, "%s %lld (the checkpoint's: %lld)", name, (long long)(cli), (long long)(ck)), 1
    char x1[32], x2[32];
#define NUM_OPT(ch, name, cli, ck) if (g[ch] && (cli) != (ck)) \
        return snprintf(buf, cap, "%s %s (the checkpoint's: %s)", name, shortest(cli, x1, sizeof x1), \
                        shortest(ck, x2, sizeof x2)), 1
    INT_OPT('L', "--layers", o->layers, s->layers); INT_OPT('d', "--dim", o->dim, s->dim);
    INT_OPT('H', "--heads", o->heads, s->heads); INT_OPT('K', "--kv-heads", o->kv_heads, s->kv_heads);
    INT_OPT('f', "--ffn", o->ffn, s->ffn); INT_OPT('c', "--ctx", o->t.T, s->ctx);
    INT_OPT('b', "--batch", o->t.batch, s->batch); INT_OPT('a', "--accum", o->t.accum, s->accum);
    INT_OPT('w', "--warmup", o->t.warmup, s->warmup); INT_OPT('V', "--val-seqs", o->t.val_seqs, s->val_seqs);
    NUM_OPT('l', "--lr", o->t.lr, s->lr); NUM_OPT('m', "--min-lr", o->t.min_frac, s->min_frac);
    NUM_OPT('W', "--wd", o->t.adam.wd, s->wd); NUM_OPT('C', "--clip", o->t.clip, s->clip);
#undef INT_OPT
#undef NUM_OPT
    if (g['s'] && o->t.seed != s->seed) return snprintf(buf, cap, "--seed (the checkpoint's: %llu)", (unsigned long long)s->seed), 1;
    if (g['k'] && !same_path(o->tokenizer, s->tokenizer)) return snprintf(buf, cap, "--tokenizer %s", o->tokenizer), 1;
    if (g['v'] && !same_path(o->val_text, s->val_text)) return snprintf(buf, cap, "--val-text %s", o->val_text), 1;
    int same = o->ntext == s->ntext;
    for (int i = 0; same && i < o->ntext; i++) same = same_path(o->text[i], s->text[i]);
    if (g['x'] && !same) return snprintf(buf, cap, "--text (the checkpoint's: %d files, first %s)", s->ntext, s->text[0]), 1;
    if (g['R'] && (!s->recipe || strcmp(o->recipe_name, s->recipe)))
        return snprintf(buf, cap, "--recipe %s (the checkpoint's: %s)", o->recipe_name, s->recipe ? s->recipe : "none"), 1;
    if (g['N'] && s->run_name && strcmp(o->name, s->run_name))   /* --name names only a run not stored yet */
        return snprintf(buf, cap, "--name %s (the checkpoint's run: %s)", o->name, s->run_name), 1;
    same = o->nops == s->nops;
    for (int i = 0; same && i < o->nops; i++) same = !strcmp(o->ops[i], s->op[i]);
    if (g['O'] && !same) return snprintf(buf, cap, "--op (the checkpoint's: %d --op settings)", s->nops), 1;
    return 0;
}

/* --resume DIR: the run's options come from its trainer_state.json; options given too must agree
** with them, except --steps (a new end: the schedule of the remaining steps is that of a run of that
** many steps), --eval-every, --checkpoint-every, --out (default DIR) and --json. */
static int apply_resume(opts *o)
{
    qs_err e = {{0}};
    qs_train_state *s = &o->st;
    if (qs_train_state_read(o->resume, s, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    if (o->is_plan || (s->recipe && !strncmp(s->recipe, "plan@", 5)))
        return qs_cli_usage(CMD, "--resume %s: runs under a per-layer plan (--recipe-file PLAN) cannot be resumed yet",
                            o->resume);
    char why[600];
    if (conflict(o, s, why, sizeof why)) return qs_cli_usage(CMD, "--resume %s: %s; " KEEP_MSG, o->resume, why);
    if (!o->given['n']) o->t.steps = s->steps;
    if (o->t.steps <= s->step)
        return qs_cli_usage(CMD, "--resume %s: the checkpoint is at step %d; give --steps above it to go on", o->resume,
                            s->step);
    o->t.T = s->ctx; o->t.batch = s->batch; o->t.accum = s->accum; o->t.warmup = s->warmup;
    o->t.val_seqs = s->val_seqs; o->t.lr = s->lr; o->t.min_frac = s->min_frac; o->t.clip = s->clip;
    o->t.adam = (qs_adamw_opts){s->beta1, s->beta2, s->eps, s->wd};
    o->t.seed = s->seed;
    if (!o->given['e']) o->t.eval_every = s->eval_every;
    if (!o->given['P']) o->ckpt_every = s->ckpt_every;
    if (!o->out) o->out = o->resume;
    o->tokenizer = s->tokenizer;
    o->ntext = s->ntext;
    for (int i = 0; i < s->ntext; i++) o->text[i] = s->text[i];
    o->val_text = s->val_text;
    o->recipe_name = s->recipe;
    o->nops = s->nops;
    for (int i = 0; i < s->nops; i++) o->ops[i] = s->op[i];
    return 0;
}


/* --op OPERAND=FORMAT[:options]: the operand's slot takes the format (blocks along the reduction
** dimension, which the recipe sets); ":round=sr" becomes the slot's per-call stochastic rounding. */
static int apply_op(const char *spec, qs_llm_recipe *r)
{
    const char *eq = strchr(spec, '=');
    char name[32];
    int op;
    if (!eq || (size_t)(eq - spec) >= sizeof name)
        return qs_cli_usage(CMD, "--op '%s' is not OPERAND=FORMAT (operands fwd.x, fwd.w, dgrad.dy, dgrad.w, wgrad.dy, "
                                 "wgrad.x)", spec);
    memcpy(name, spec, (size_t)(eq - spec));
    name[eq - spec] = 0;
    if (qs_llm_operand_parse(name, &op))
        return qs_cli_usage(CMD, "--op '%s': unknown operand '%s' (fwd.x, fwd.w, dgrad.dy, dgrad.w, wgrad.dy, wgrad.x)",
                            spec, name);
    qs_apply a;
    if (!eq[1] || strchr(eq + 1, ',')) return qs_cli_usage(CMD, "--op '%s': give one format after '='", spec);
    if (!strcmp(eq + 1, "none")) { memset(&r->op[op], 0, sizeof r->op[op]); return 0; }   /* the slot off: FP32 */
    if (qs_llm_parse_fmt(CMD, eq + 1, &a)) return QS_EXIT_USAGE;
    qs_llm_slot *sl = &r->op[op];
    memset(sl, 0, sizeof *sl);
    sl->on = 1;
    sl->a = a;
    sl->a.axis = qs_llm_operand_axis(op);
    if (a.o.round == QS_RND_SR) { sl->sr = 1; sl->a.o.round = QS_RND_DEFAULT; }
    return 0;
}

/* The recipe of --recipe (default fp32) with every --op on top, checked; t.recipe stays NULL without either. */
static int make_recipe(opts *o)
{
    if (!o->recipe_name && !o->nops && !o->is_plan) return 0;
    qs_err e = {{0}};
    if (qs_llm_recipe_preset(o->recipe_name ? o->recipe_name : "fp32", &o->recipe, &e))
        return qs_cli_usage(CMD, "--recipe: %s", e.msg);
    for (int i = 0; i < o->nops; i++) {
        int rc = apply_op(o->ops[i], &o->recipe);
        if (rc) return rc;
    }
    if (o->nops) {
        size_t k = strlen(o->recipe.name);
        snprintf(o->recipe.name + k, sizeof o->recipe.name - k, "%s", "+op");
    }
    if (qs_llm_recipe_check(&o->recipe, &e)) return qs_cli_usage(CMD, "--op: %s", e.msg);
    o->t.recipe = &o->recipe;
    if (o->is_plan) {   /* the plan's forward per linear on top of the base (train_plan.h) */
        free(o->per);
        int rc = qs_train_plan_recipes(&o->plan, &o->recipe, &o->per, &o->nper);
        if (rc) return rc;
        for (size_t i = 0; i < o->nper; i++) snprintf(o->per[i].name, sizeof o->per[i].name, "%s", o->plan_recipe);
        o->t.recipes = o->per;
        o->t.nrecipes = o->nper;
    }
    return 0;
}

/* The recipe's name as runs record it: the plan's, or the recipe's own. */
static const char *run_recipe(const opts *o) { return o->is_plan ? o->plan_recipe : o->t.recipe ? o->recipe.name : "fp32"; }

/* A plan's shape checked once the model is made or loaded (the job's model_check). */
static int plan_check(void *ctx, const qs_llm_cfg *c, qs_err *e)
{
    const opts *o = ctx;
    return o->is_plan ? qs_train_plan_check(&o->plan, c, e) : 0;
}

/* The label of a slot: "fp32" when off, else the format's label plus the recipe's own flags. */
static void slot_label(const qs_llm_slot *sl, char *buf, size_t cap)
{
    if (!sl->on) { snprintf(buf, cap, "fp32"); return; }
    qs_apply a = sl->a;
    a.axis = 1;   /* the axis is the operand's, not an option */
    qs_quant_label(&a, a.f->name, buf, cap);
    size_t k = strlen(buf);
    if (k < cap) snprintf(buf + k, cap - k, "%s%s%s", sl->sr ? ":sr" : "", sl->rht ? ":rht" : "", sl->tile2d ? ":tile16" : "");
}

/* Default training texts: make data's data/text/ *.txt, except the evaluation text (train_sweep.h). */
static int default_texts(opts *o)
{
    qs_train_default_texts(o->dflt, MAX_TEXTS, &o->ntext);
    for (int i = 0; i < o->ntext; i++) o->text[i] = o->dflt[i];
    if (!o->ntext || (!o->val_text && access(QS_LLM_DEFAULT_TEXT, F_OK)))
        return qs_cli_usage(CMD, "no --text/--val-text given and %s/*.txt is not there (run `make data`)", DEFAULT_TEXT_DIR);
    return 0;
}

/* QSCOPE_TEST_STEP_DELAY_MS=N: sleep N ms after each step, so that the tests' signals and kills land
** mid-run however fast the machine trains (a test hook, as QSCOPE_TEST_CKPT_KILL; results unchanged). */
static void test_step_delay(void)
{
    static long ms = -1;
    if (ms < 0) {
        const char *v = getenv("QSCOPE_TEST_STEP_DELAY_MS");
        ms = v ? strtol(v, NULL, 10) : 0;
        if (ms < 0 || ms > 10000) ms = 0;
    }
    if (ms) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int progress(void *ctx, const qs_train_rec *r)
{
    opts *o = ctx;
    if (qs_trec_step(&o->rec, r)) return 1;
    test_step_delay();
    if (o->csv) return 0;
    if (!o->json && !o->in_sweep && !isnan(r->val_loss))
        printf("step %6d  train %.4f  val %.4f  |g| %.3g  lr %.3g  %.0f tok/s\n", r->step, r->train_loss, r->val_loss,
               r->grad_norm, r->lr, r->tok_s);
    else if (!o->json && isatty(2) && (r->step == 1 || r->step % 10 == 0))   /* a heartbeat on a terminal */
        fprintf(stderr, "step %d/%d  train %.4f\n", r->step, o->t.steps, r->train_loss);
    return 0;
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* The last measured validation loss (a stopped run's last step may not have measured it). */
static double final_val(const qs_train_result *res)
{
    for (int i = res->steps_done - 1; i >= res->start_step; i--)
        if (!isnan(res->rec[i].val_loss)) return res->rec[i].val_loss;
    return NAN;
}

static void print_json(const opts *o, const qs_train_result *res)
{
    const qs_llm_cfg *c = &res->m.c;
    const qs_train_rec *rec = res->rec;
    double fin = o->t.steps ? final_val(res) : res->val0;   /* --steps 0: no update */
    json_t *steps = json_array();
    for (int i = res->start_step; i < res->steps_done; i++) {
        json_t *r = json_pack("{s:i,s:o,s:o,s:o,s:o}", "step", rec[i].step, "train_loss", num(rec[i].train_loss),
                              "grad_norm", num(rec[i].grad_norm), "lr", num(rec[i].lr), "tok_s", num(rec[i].tok_s));
        if (!isnan(rec[i].val_loss)) json_object_set_new(r, "val_loss", num(rec[i].val_loss));
        json_array_append_new(steps, r);
    }
    json_t *j = json_pack("{s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i},s:s,s:I,s:I,s:{s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:I},"
                          "s:o,s:o,s:o,s:s?}",
                          "model", "layers", c->n_layer, "dim", c->dim, "heads", c->n_head, "kv_heads", c->n_kv_head,
                          "head_dim", c->head_dim, "ffn", c->ffn, "vocab", c->vocab, "ctx", c->ctx, "tokenizer",
                          res->bytes ? "bytes" : o->tokenizer ? o->tokenizer : o->init, "train_tokens",
                          (json_int_t)res->ntrain, "val_tokens", (json_int_t)res->nval, "options", "batch",
                          o->t.batch, "steps", o->t.steps, "accum", o->t.accum, "warmup", o->t.warmup, "lr", o->t.lr,
                          "min_lr", o->t.min_frac, "wd", o->t.adam.wd, "clip", o->t.clip, "seed", (json_int_t)o->t.seed,
                          "initial_val_loss", num(res->val0), "final_val_loss", num(fin), "steps",
                          steps, "out", o->out);
    json_t *rj = json_object(), *ops = json_object();
    json_object_set_new(rj, "name", json_string(run_recipe(o)));
    for (int i = 0; i < QS_OP_COUNT; i++) json_object_set_new(ops, qs_llm_operand_name(i), json_string(o->labels[i]));
    json_object_set_new(rj, "operands", ops);
    if (o->is_plan)
        json_object_set_new(rj, "plan", json_pack("{s:s,s:s,s:s,s:i}", "file", o->plan.path, "hash", o->plan.hash,
                                                  "backward", o->recipe.name, "layers", o->plan.layers));
    json_object_set_new(rj, "validation", json_string("fp32"));
    json_object_set_new(j, "recipe", rj);
    json_object_set_new(j, "ranks", json_integer(o->t.par ? o->t.par->size : 1));
    if (o->t.par) {   /* rank 0's time in the data-parallel exchange (docs/scale.md) */
        double w, x;
        qs_train_par_seconds(&w, &x);
        json_object_set_new(j, "grad_wait_s", json_real(w));
        json_object_set_new(j, "grad_sum_s", json_real(x));
    }
    json_object_set_new(j, "status", json_string(res->stopped ? "stopped" : "done"));
    json_object_set_new(json_object_get(j, "options"), "checkpoint_every", json_integer(o->ckpt_every));
    json_object_set_new(j, "resumed_from", json_integer(res->start_step));
    json_object_set_new(j, "data_hash", json_string(res->data_hash));
    json_object_set_new(j, "steps_done", json_integer(res->steps_done));
    if (o->rec.run[0]) qs_json_set_text(j, "run", o->rec.run);
    if (!isnan(res->grad_loss)) json_object_set_new(j, "grad_loss", json_real(res->grad_loss));
    char *s = json_dumps(j, JSON_INDENT(1));
    if (s) puts(s);
    free(s);
    json_decref(j);
}

static void start(void *ctx, const qs_llm_cfg *c, size_t ntrain, size_t nval)
{
    const opts *o = ctx;
    if (o->csv || o->in_sweep) return;
    if (!o->json && o->is_plan) qs_train_plan_print(stdout, &o->plan, o->recipe.name, &o->recipe);
    else if (!o->json && o->t.recipe) {
        printf("train: recipe %s (", o->recipe.name);
        for (int i = 0; i < QS_OP_COUNT; i++) {
            char lab[160];
            slot_label(&o->recipe.op[i], lab, sizeof lab);
            printf("%s%s=%s", i ? " " : "", qs_llm_operand_name(i), lab);
        }
        printf("; validation fp32)\n");
    }
    if (!o->json && o->resume)
        printf("train: resuming %s at step %d of %d\n", o->resume, o->st.step, o->t.steps);
    if (!o->json)
        printf("train: %d layers, dim %d, %d/%d heads, ffn %d, vocab %d, ctx %d; %zu training tokens, "
               "%zu validation%s\n",
               c->n_layer, c->dim, c->n_head, c->n_kv_head, c->ffn, c->vocab, o->t.T, ntrain, nval,
               o->t.par ? "; data-parallel over the MPI ranks" : "");
}

static int ready(void *ctx, const qs_train_data *d, qs_err *e) { return qs_trec_ready(&((opts *)ctx)->rec, d, e); }

/* Everything after the options: the recipe, the shape, --out and the texts checked, then the run and
** its recording, stored under o->name in sweep (NULL: none) unless --no-store.  Returns the exit code;
** *ok: r holds the run (free it). */
static int run_job(qs_cli *cli, opts *o, const char *sweep, qs_train_result *r, int *ok)
{
    *ok = 0;
    int rc = make_recipe(o);
    if (rc) return rc;
    static qs_train_par par;   /* print_json reads it after the run */
    /* under mpirun: one run data-parallel (rank 0 prints and writes); a sweep's runs are whole on a rank */
    o->t.par = o->in_sweep ? NULL : qs_train_par_mpi(&par);
    if (o->t.par && ((long)o->t.batch * o->t.accum) % o->t.par->size)
        return qs_cli_usage(CMD, "--batch x --accum (%ld windows a step) is not a multiple of the %d MPI ranks",
                            (long)o->t.batch * o->t.accum, o->t.par->size);
    if (o->t.par && qs_par_rank() > 0) {   /* rank 0 alone writes files */
        o->out = NULL;
        o->grad.grad_out = o->grad.batch_out = o->grad.operand_out = NULL;
    }
    qs_err e = {{0}};
    qs_train_job j = {.tokenizer = o->tokenizer, .init = o->init, .out = o->out, .ckpt_every = o->ckpt_every,
                      .resume = o->resume, .resume_state = o->resume ? &o->st : NULL,
                      .recipe_preset = o->is_plan ? o->plan_recipe : o->recipe_name, .model_check = plan_check,
                      .ops = o->ops, .nops = o->nops, .run_name = o->rec.run, .text = o->text, .ntext = o->ntext,
                      .val_text = o->val_text ? o->val_text : QS_LLM_DEFAULT_TEXT, .layers = o->layers, .dim = o->dim,
                      .heads = o->heads, .kv_heads = o->kv_heads, .ffn = o->ffn, .t = o->t, .grad = o->grad,
                      .start = start, .step = progress, .ctx = o, .ready = ready, .stop = &qs_trec_stop};
    if (qs_train_shape_check(&j, &e)) return qs_cli_usage(CMD, "%s", e.msg);
    /* a bad --out is found before the training, and nothing is created before the first checkpoint */
    if (o->out && qs_train_out_check(o->out, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    if (!o->ntext && (rc = default_texts(o))) return rc;
    j.text = o->text;
    j.ntext = o->ntext;
    qs_trec *t = &o->rec;
    *t = (qs_trec){.cli = cli, .name = o->name, .sweep = sweep, .store = !o->no_store, .csv = o->csv, .json = o->json,
                   .job = &j, .recipe = run_recipe(o), .plan_file = o->is_plan ? o->plan.path : NULL,
                   .plan_hash = o->is_plan ? o->plan.hash : NULL,
                   .tokenizer = o->tokenizer ? o->tokenizer : o->init, .res = r, .e = &e, .cap = o->cap};
    for (int i = 0; i < QS_OP_COUNT; i++) {
        snprintf(o->labels[i], sizeof o->labels[i], "fp32");
        if (o->is_plan && i <= QS_OP_FWD_W) snprintf(o->labels[i], sizeof o->labels[i], "plan");
        else if (o->t.recipe) slot_label(&o->recipe.op[i], o->labels[i], sizeof o->labels[i]);
        t->op_label[i] = o->labels[i];
    }
    qs_par_training(o->t.par != NULL);
    *ok = qs_train_job_run(&j, r, &e) == 0;
    qs_par_training(0);
    if (!*ok) qs_cli_err(r->bad_input ? QS_EXIT_USAGE : QS_EXIT_ERR, &e);
    rc = qs_trec_end(t, *ok, r, &e);
    return !*ok && r->bad_input ? QS_EXIT_USAGE : rc;
}

/* One run, printed. */
static int run(qs_cli *cli, opts *o)
{
    qs_train_result r;
    int ok, rc = run_job(cli, o, NULL, &r, &ok);
    if (!ok) return rc;
    qs_trec *t = &o->rec;
    if (o->json) print_json(o, &r);
    else if (!o->csv && !r.stopped) {
        if (!isnan(r.grad_loss)) printf("cross-check micro-batch: loss %.9g\n", r.grad_loss);
        printf("validation loss %.4f -> %.4f%s%s%s%s\n", r.val0, o->t.steps ? final_val(&r) : r.val0,
               o->out ? "; checkpoint " : "", o->out ? o->out : "", t->run[0] ? "; run " : "",
               t->run[0] ? qs_esc(t->run) : "");
    }
    qs_train_result_free(&r);
    return rc;
}

/* A sweep run stored already: 1 done (*vf its final validation loss), 0 to run (a stored run that
** did not finish is removed first, so the name is free), -1 error. */
static int stored_run(qs_cli *cli, const char *run, double *v0, double *vf, qs_err *e)
{
    qs_db *db = qs_db_open(cli->db_path, e);
    if (!db) return -1;
    qs_train_run_item it;
    int found = qs_train_run_get(db, run, &it, e), rc = found < 0 ? -1 : 0;
    if (found > 0) {
        if (!strcmp(it.status, "done")) { rc = 1; *v0 = it.val0; *vf = it.val_final; }
        else if (qs_train_run_remove(db, &run, 1, e)) rc = -1;
        qs_train_run_item_clear(&it);
    }
    qs_db_close(db);
    return rc;
}

/* ---- a sweep over the MPI ranks (train_par.h): whole runs on every rank, rank 0 stores and prints ---- */

typedef struct {
    qs_cli *cli;
    opts *o;
    const qs_train_sweep *sw;
    const char *name;
    size_t *todo;   /* the sweep's runs to train (not stored and done already), as run indices */
    FILE *out;
    json_t *runs;
    qs_db *db;
} sweep_ranks;

/* On any rank: run i of the list trained whole into c (nothing stored here). */
static int sweep_rank_run(size_t i, void *ctx, qs_train_capture *c, qs_err *e)
{
    sweep_ranks *x = ctx;
    opts *o = x->o;
    const char *rec;
    uint64_t seed;
    char run[160];
    qs_train_sweep_at(x->sw, x->todo[i], &rec, &seed);
    qs_train_sweep_run_name(x->name, rec, seed, run, sizeof run);
    o->recipe_name = rec;
    o->nops = 0;
    o->t.seed = seed;
    o->t.recipe = NULL;
    o->name = o->no_store ? NULL : run;
    qs_train_result r;
    int ok = 0;
    o->cap = c;
    int rc = run_job(x->cli, o, x->name, &r, &ok);
    o->cap = NULL;
    if (ok) qs_train_result_free(&r);
    return rc ? qs_fail(e, "sweep run %s: %s", run, c->why ? c->why : "failed") : 0;
}

/* On rank 0, in run order once every rank has finished: store the run and print its line. */
static int sweep_rank_store(size_t i, const qs_train_capture *c, void *ctx, qs_err *e)
{
    sweep_ranks *x = ctx;
    const char *rec;
    uint64_t seed;
    char run[160];
    qs_train_sweep_at(x->sw, x->todo[i], &rec, &seed);
    qs_train_sweep_run_name(x->name, rec, seed, run, sizeof run);
    if (!x->o->no_store) {
        if (!x->db && !(x->db = qs_db_open(x->cli->db_path, e))) return -1;
        if (qs_train_capture_store(x->db, run, x->name, c, e)) return -1;
    }
    double vf = c->nstep ? c->step[c->nstep - 1].val_loss : c->val0;
    if (!x->o->json)
        fprintf(x->out, "%-32s %-10s seed %-4" PRIu64 " validation %.4f -> %.4f  %.0f s on rank %d\n", run, rec, seed,
                c->val0, vf, c->seconds, c->rank);
    json_t *jr = json_pack("{s:s,s:s,s:I,s:o,s:o,s:b,s:f,s:i}", "name", run, "recipe", rec, "seed", (json_int_t)seed,
                           "initial_val_loss", num(c->val0), "final_val_loss", num(vf), "stored_before", 0, "seconds",
                           c->seconds, "rank", c->rank);
    json_array_append_new(x->runs, jr);
    return 0;
}

/* The sweep under mpirun: rank 0 finds the runs stored and done already (reported, not run again) and
** every rank learns them through the ranks' sum; the rest go to the ranks whole and are stored, in run
** order, once every rank has finished (docs/scale.md, "A sweep's runs over the ranks"). */
static int run_sweep_ranks(qs_cli *cli, opts *o, const qs_train_sweep *sw, const char *name, FILE *out, json_t *runs,
                           qs_err *e)
{
    size_t n = qs_train_sweep_count(sw), nt = 0;
    double *flag = calloc(n ? n : 1, sizeof *flag), *v = calloc(2 * (n ? n : 1), sizeof *v);   /* 1 done, -1 error */
    size_t *todo = malloc((n ? n : 1) * sizeof *todo);
    int rc = 0;
    if (!flag || !v || !todo) { free(flag); free(v); free(todo); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    for (size_t i = 0; i < n && qs_par_rank() == 0 && !o->no_store; i++) {
        const char *rec;
        uint64_t seed;
        char run[160];
        qs_train_sweep_at(sw, i, &rec, &seed);
        qs_train_sweep_run_name(name, rec, seed, run, sizeof run);
        int st = stored_run(cli, run, &v[2 * i], &v[2 * i + 1], e);
        flag[i] = st;
        if (st < 0) break;
        if (st && !o->json)
            fprintf(out, "%-32s %-10s seed %-4" PRIu64 " validation %.4f -> %.4f  stored, 0 s\n", run, rec, seed,
                    v[2 * i], v[2 * i + 1]);
        if (st)
            json_array_append_new(runs, json_pack("{s:s,s:s,s:I,s:o,s:o,s:b}", "name", run, "recipe", rec, "seed",
                                                  (json_int_t)seed, "initial_val_loss", num(v[2 * i]), "final_val_loss",
                                                  num(v[2 * i + 1]), "stored_before", 1));
    }
    qs_err se = {{0}};
    if (qs_par_sum_f64(flag, n, &se)) { free(flag); free(v); free(todo); return qs_cli_err(QS_EXIT_ERR, &se); }
    for (size_t i = 0; i < n; i++) {
        if (flag[i] < 0) rc = -1;
        else if (flag[i] == 0) todo[nt++] = i;
    }
    if (rc) {   /* rank 0 could not read the database: every rank stops */
        free(flag); free(v); free(todo);
        return qs_par_rank() == 0 ? qs_cli_err(QS_EXIT_ERR, e) : qs_cli_error(QS_EXIT_ERR, "the database could not be read");
    }
    fflush(out);
    sweep_ranks x = {cli, o, sw, name, todo, out, runs, NULL};
    if (qs_train_sweep_ranks(nt, sweep_rank_run, sweep_rank_store, &x, "train --sweep", e)) rc = qs_cli_err(QS_EXIT_ERR, e);
    qs_db_close(x.db);
    free(flag);
    free(v);
    free(todo);
    return rc;
}

/* The sweep's runs in order, one line each on out (--json: the runs at the end).  Runs stored and
** done already are reported, not run again.  A run that fails or is stopped stops the sweep (the
** runs before it are kept); returns its exit code, with e saying which run. */
static int run_sweep(qs_cli *cli, opts *o, const qs_train_sweep *sw, FILE *out, qs_err *e)
{
    char key[8192], name[64];
    qs_train_shape sh = {o->layers, o->dim, o->heads, o->kv_heads, o->ffn};
    qs_train_config_key(&sh, &o->t, o->tokenizer, o->text, o->ntext, o->val_text ? o->val_text : QS_LLM_DEFAULT_TEXT,
                        key, sizeof key);
    qs_train_sweep_name(key, name, sizeof name);
    o->in_sweep = 1;
    size_t n = qs_train_sweep_count(sw);
    if (!o->json)
        fprintf(out, "sweep %s: %zu runs (%d recipes x %d seeds), %d layers, dim %d, ctx %d, batch %d, %d steps\n", name,
                n, sw->nrecipe, sw->nseed, o->layers, o->dim, o->t.T, o->t.batch, o->t.steps);
    json_t *runs = json_array();
    int rc = 0;
    if (qs_par_size() > 1) rc = run_sweep_ranks(cli, o, sw, name, out, runs, e);
    for (size_t i = 0; i < n && !rc && qs_par_size() == 1; i++) {
        const char *rec;
        uint64_t seed;
        char run[160];
        qs_train_sweep_at(sw, i, &rec, &seed);
        qs_train_sweep_run_name(name, rec, seed, run, sizeof run);
        o->recipe_name = rec;
        o->nops = 0;
        o->t.seed = seed;
        o->t.recipe = NULL;   /* run_job makes it from recipe_name */
        o->name = o->no_store ? NULL : run;
        double t0 = qs_now_s(), v0 = NAN, vf = NAN;
        int st = o->no_store || qs_par_rank() ? 0 : stored_run(cli, run, &v0, &vf, e), ok = 0;
        if (st < 0) { rc = qs_cli_err(QS_EXIT_ERR, e); break; }
        if (!st) {
            qs_train_result r;
            rc = run_job(cli, o, name, &r, &ok);
            if (ok) {
                v0 = r.val0;
                vf = r.stopped ? NAN : o->t.steps ? r.rec[o->t.steps - 1].val_loss : r.val0;
                qs_train_result_free(&r);
            }
            if (rc) { qs_fail(e, "sweep run %s ended with exit code %d", run, rc); break; }
        }
        double dt = qs_now_s() - t0;
        if (!o->json)
            fprintf(out, "%-32s %-10s seed %-4" PRIu64 " validation %.4f -> %.4f  %s%.0f s\n", run, rec, seed, v0, vf,
                    st ? "stored, " : "", st ? 0.0 : dt);
        json_t *jr = json_pack("{s:s,s:s,s:I,s:o,s:o,s:b}", "name", run, "recipe", rec, "seed", (json_int_t)seed,
                               "initial_val_loss", num(v0), "final_val_loss", num(vf), "stored_before", st);
        if (!st) json_object_set_new(jr, "seconds", json_real(dt));
        json_array_append_new(runs, jr);
        fflush(out);
    }
    if (!rc && o->json) {
        json_t *j = json_pack("{s:s,s:o}", "sweep", name, "runs", runs);
        char *txt = json_dumps(j, JSON_INDENT(1));
        if (txt) puts(txt);
        free(txt);
        json_decref(j);
    } else
        json_decref(runs);
    return rc;
}

/* Options as without any: the default model and budget (train_sweep.h). */
static void defaults(opts *o)
{
    memset(o, 0, sizeof *o);
    qs_train_shape d;
    qs_train_defaults(&d, &o->t);
}

int qs_train_sweep_default(qs_cli *cli, FILE *out, qs_err *e)
{
    opts *o = malloc(sizeof *o);
    if (!o) return qs_fail(e, "out of memory");
    defaults(o);
    fill_shape(o);
    qs_train_sweep sw;
    int rc = qs_train_sweep_parse("default", &sw, e);
    if (!rc) {
        qs_train_default_texts(o->dflt, MAX_TEXTS, &o->ntext);
        for (int i = 0; i < o->ntext; i++) o->text[i] = o->dflt[i];
        if (!o->ntext) rc = qs_fail(e, "%s/*.txt is not there (run `make data`)", DEFAULT_TEXT_DIR);
    }
    if (!rc && run_sweep(cli, o, &sw, out, e)) rc = -1;
    free(o);
    return rc;
}

int qs_cmd_train(qs_cli *cli, int argc, char **argv)
{
    opts o;
    defaults(&o);
    int rc = parse(cli, argc, argv, &o);
    if (!rc && o.resume) rc = apply_resume(&o);
    if (!rc && !o.resume) fill_shape(&o);
    qs_train_sweep sw;
    qs_err e = {{0}};
    if (!rc && o.sweep && qs_train_sweep_parse(o.sweep, &sw, &e)) rc = qs_cli_usage(CMD, "%s", e.msg);
    if (!rc && o.sweep && !o.ntext) rc = default_texts(&o);
    if (!rc) rc = o.sweep ? run_sweep(cli, &o, &sw, stdout, &e) : run(cli, &o);
    qs_train_state_free(&o.st);
    if (o.is_plan) qs_plan_file_free(&o.plan);
    free(o.per);
    return rc;
}
