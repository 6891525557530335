/*
** `qscope rl grpo`: GRPO on a real transformer (analysis/grpo_llm.h) with quantized rollouts and a trainer
** in any recipe; the default policy is pre-trained once on the task's text (analysis/grpo_policy.h).
** Each run is an rl_run (its response tokens, so `qscope ais` works on it) plus rl_step rows, one
** transaction per completed step.
*/
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_rl.h"
#include "par.h"
#include "rl_grpo_cli.h"
#include "../../analysis/grpo_llm.h"
#include "../../analysis/grpo_policy.h"
#include "../../analysis/llm_eval_service.h"
#include "../../kernels/qs_version.h"
#include "../../store/json_out.h"
#include "../../store/llm_load.h"
#include "../../store/llm_save_hf.h"
#include "../../store/q_rl.h"
#include "../../store/rl_log.h"
#include "../../store/grpo_state.h"
#include "../../store/rl_step.h"
#include "../../store/train_ckpt.h"

#define CMD "rl grpo"


enum { G_MODEL = 0x3001, G_TASK, G_PROMPTS, G_GROUP, G_MAXNEW, G_TEMP, G_STEPS, G_SEED, G_NAME, G_LR, G_KL, G_ROLL,
       G_TRAINER, G_CORR, G_OUT, G_REPLACE, G_NOSTORE, G_JSON, G_CLIP, G_QUIET, G_SWEEP, G_RESUME, G_CKPT };

static int parse_pos(const char *opt, const char *s, double lo, double hi, double *out)
{
    if (qs_parse_f64(s, out) || !(*out >= lo) || !(*out <= hi)) return qs_cli_usage(CMD, "%s wants a number in %g..%g, not '%s'", opt, lo, hi, s);
    return 0;
}

static void gopts_free(gopts *o)
{
    for (int i = 0; i < o->nargs; i++) free(o->args[i]);
    o->nargs = 0;
}

/* Record a setting as "--key=value" (what a checkpoint stores and --resume parses again). */
static int record(gopts *o, const struct option *lo, int ch, const char *val)
{
    const struct option *p = lo;
    while (p->name && p->val != ch) p++;
    if (!p->name) return 0;
    if (o->nargs == QS_GRPO_STATE_MAX_ARGS) return qs_cli_usage(CMD, "too many options");
    size_t n = strlen(p->name) + (val ? strlen(val) : 0) + 4;
    char *a = malloc(n);
    if (!a) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    snprintf(a, n, "--%s%s%s", p->name, val ? "=" : "", val ? val : "");
    o->args[o->nargs++] = a;
    return 0;
}

/* The options that are no setting of the run (a resumed run may give them anew). */
static int not_setting(int ch)
{
    return ch == G_MODEL || ch == G_OUT || ch == G_REPLACE || ch == G_NOSTORE || ch == G_JSON || ch == G_QUIET ||
           ch == G_RESUME || ch == G_CKPT || ch == G_SWEEP || ch == ':' || ch == '?';
}

static int parse(int argc, char **argv, gopts *o)
{
    static const struct option lo[] = {
        {"model", 1, 0, G_MODEL}, {"task", 1, 0, G_TASK}, {"prompts", 1, 0, G_PROMPTS}, {"group", 1, 0, G_GROUP},
        {"max-new", 1, 0, G_MAXNEW}, {"temp", 1, 0, G_TEMP}, {"steps", 1, 0, G_STEPS}, {"seed", 1, 0, G_SEED},
        {"name", 1, 0, G_NAME}, {"lr", 1, 0, G_LR}, {"kl-coef", 1, 0, G_KL}, {"rollout", 1, 0, G_ROLL},
        {"trainer", 1, 0, G_TRAINER}, {"correction", 1, 0, G_CORR}, {"out", 1, 0, G_OUT}, {"replace", 0, 0, G_REPLACE},
        {"no-store", 0, 0, G_NOSTORE}, {"json", 0, 0, G_JSON}, {"clip", 1, 0, G_CLIP}, {"quiet", 0, 0, G_QUIET},
        {"sweep", 1, 0, G_SWEEP}, {"resume", 1, 0, G_RESUME}, {"checkpoint-every", 1, 0, G_CKPT},
        AIS_LONGOPTS, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    qs_grpo_llm_cfg_default(&o->c);
    o->name = "rl/grpo";
    int band = 0, ch, rc = 0, seed_set = 0;
    optind = 1;
    opterr = 0;
    while (!rc && (ch = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        if (!not_setting(ch) && (rc = record(o, lo, ch, optarg))) return rc;
        switch (ch) {
        case G_MODEL: o->model = optarg; break;
        case G_TASK: {
            int t = qs_rl_task_find(optarg);
            if (t < 0) return qs_cli_usage(CMD, "--task: unknown task '%s' (%s)", optarg, QS_RL_TASK_NAMES);
            o->c.task = (qs_rl_task)t;
            break;
        }
        case G_PROMPTS: rc = qs_cli_parse_int(CMD, "--prompts", optarg, 1, 256, &o->c.B); break;
        case G_GROUP: rc = qs_cli_parse_int(CMD, "--group", optarg, 2, 256, &o->c.G); break;
        case G_MAXNEW: rc = qs_cli_parse_int(CMD, "--max-new", optarg, 1, 256, &o->c.max_new); break;
        case G_STEPS: rc = qs_cli_parse_int(CMD, "--steps", optarg, 0, 1 << 20, &o->c.steps); break;
        case G_TEMP: rc = parse_pos("--temp", optarg, 1e-3, 100, &o->c.temp); break;
        case G_LR: rc = parse_pos("--lr", optarg, 0, 10, &o->c.lr); break;
        case G_KL: rc = parse_pos("--kl-coef", optarg, 0, 1e6, &o->c.kl_coef); break;
        case G_CLIP: rc = parse_pos("--clip", optarg, 0, 1e30, &o->c.clip); break;
        case G_SEED:
            if (qs_parse_u64(optarg, (unsigned long long *)&o->c.seed)) return qs_cli_usage(CMD, "bad --seed '%s'", optarg);
            seed_set = 1;
            break;
        case G_NAME: o->name = optarg; o->name_set = 1; break;
        case G_SWEEP: o->sweep = optarg; break;
        case G_ROLL: o->rollout_spec = optarg; break;
        case G_TRAINER: o->trainer_name = optarg; break;
        case G_CORR: o->correction = optarg; break;
        case G_OUT: o->out = optarg; break;
        case G_RESUME: o->resume = optarg; break;
        case G_CKPT: rc = qs_cli_parse_int(CMD, "--checkpoint-every", optarg, 1, 1 << 20, &o->ckpt_every); break;
        case G_REPLACE: o->replace = 1; break;
        case G_NOSTORE: o->no_store = 1; break;
        case G_JSON: o->json = 1; break;
        case G_QUIET: o->quiet = 1; break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        case '?': return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        default: {
            int k = qs_rl_ais_opt(CMD, ch, optarg, &o->c.ais, &band);
            if (k < 0) return QS_EXIT_USAGE;
        }
        }
    }
    if (rc) return rc;
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->sweep && (o->rollout_spec || o->out || o->replace || o->no_store || o->json || o->trainer_name != NULL ||
                     o->correction != NULL || seed_set))
        return qs_cli_usage(CMD, "--sweep sets rollouts, trainers, corrections and seeds itself and stores whole runs: "
                                 "drop --rollout, --trainer, --correction, --seed, --out, --replace, --no-store and --json");
    if (o->sweep && (o->resume || o->ckpt_every))
        return qs_cli_usage(CMD, "--sweep re-runs what is not stored whole: no --resume or --checkpoint-every");
    if (!o->trainer_name) o->trainer_name = "fp32";
    if (!o->correction) o->correction = "none";
    return o->sweep ? 0 : qs_rl_grpo_settle(o);
}

int qs_rl_grpo_settle(gopts *o)
{
    int rc;
    if (qs_ais_method_parse(o->correction, &o->c.method))
        return qs_cli_usage(CMD, "--correction: unknown method '%s' (none, tis, icepop, seq_mis, geo_rs, ais_r)", o->correction);
    qs_err e = {{0}};
    o->c.trainer = NULL;
    if (qs_llm_recipe_preset(o->trainer_name, &o->recipe, &e))
        return qs_cli_usage(CMD, "--trainer: %s (presets: %s)", e.msg, QS_LLM_RECIPE_PRESETS);
    if (strcmp(o->trainer_name, "fp32")) o->c.trainer = &o->recipe;
    if (o->rollout_spec) {
        if ((rc = qs_llm_parse_config(CMD, "--rollout", o->rollout_spec, &o->roll))) return rc;
        if (o->roll.imat) {   /* the rollout's weights are rounded by the GRPO loop, without importances */
            qs_eval_cfgs_free(&o->roll, 1);
            return qs_cli_usage(CMD, "--rollout: imatrix= is not supported here (llm eval --config takes it)");
        }
        if (qs_llm_xspec_any(&o->roll.xs)) return qs_cli_usage(CMD, "--rollout: rot= and rht= are supported by llm eval only");
    } else {   /* the trainer's own forward precision: its fwd.w and fwd.x formats */
        memset(&o->roll, 0, sizeof o->roll);
        const qs_llm_slot *w = &o->recipe.op[QS_OP_FWD_W], *a = &o->recipe.op[QS_OP_FWD_X];
        if (w->on) { o->roll.w = w->a; o->roll.has_w = 1; }
        if (a->on) { o->roll.a = a->a; o->roll.has_a = 1; }
        snprintf(o->roll.label, sizeof o->roll.label, "%s", o->c.trainer ? o->trainer_name : "fp32");
    }
    o->c.roll = (qs_grpo_numerics){o->roll.w, o->roll.a, o->roll.kv, o->roll.has_w, o->roll.has_a, o->roll.has_kv,
                                   o->roll.resq, 1};
    return 0;
}

/* ---------------------------------------------------------------- storage */

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

typedef struct run_ctx {
    const gopts *o;
    qs_db *db;
    int64_t run_id;
    json_t *steps;        /* --json: the step records */
    double r_first, r_last;
    int seen;             /* steps run by this process */
    int written;          /* the step of the last checkpoint written (-1: none) */
    qs_llm_save_tok tok;  /* --out: the checkpoints' tokenizer */
    qs_grpo_ckpt_state st;   /* --out: the checkpoint's state but for where the run stands */
} run_ctx;

static json_t *step_json(const qs_grpo_llm_step *r)
{
    json_t *j = json_pack("{s:i}", "step", r->step);
    qs_json_add_nums(j, "reward", r->reward, "reward_std", r->reward_std, "resp_len", r->resp_len, "entropy", r->entropy,
                     "kl_init", r->kl_init, "mismatch_k3", r->mismatch_k3, "weight_mean", r->weight_mean,
                     "weight_zero", r->weight_zero, "lambda", r->lambda, "loss", r->loss, "grad_norm", r->grad_norm,
                     "sample_s", r->sample_s, "train_s", r->train_s, (const char *)NULL);
    return j;
}

/* Each sequence's ids in rl_seq: "STEP:SEQ", and the group's "STEP:PROMPT:TEXT" with the prompt's text
** (without its leading newline), so the exact sequence can be rebuilt from the database. */
static int put_seqs(qs_db *db, int64_t run_id, const gopts *o, int step, const char (*prompts)[QS_RL_TASK_PROMPT_MAX],
                    qs_err *e)
{
    const qs_grpo_llm_cfg *c = &o->c;
    for (int i = 0; i < c->B * c->G; i++) {
        char sid[48], gid[96];
        const char *pt = prompts[i / c->G];
        snprintf(sid, sizeof sid, "%d:%d", step, i);
        snprintf(gid, sizeof gid, "%d:%d:%s", step, i / c->G, pt[0] == '\n' ? pt + 1 : pt);
        if (qs_rl_seq_put(db, run_id, step, i, sid, gid, e)) return -1;
    }
    return 0;
}

int qs_rl_grpo_put_step(qs_db *db, int64_t run_id, const gopts *o, const qs_grpo_llm_step *r, const qs_rl_row *rows,
                        size_t n, const char (*prompts)[QS_RL_TASK_PROMPT_MAX], qs_err *e)
{
    const double v[QS_RL_STEP_NCOL] = {r->reward, r->reward_std, r->resp_len, r->entropy, r->kl_init, r->mismatch_k3,
                                       r->weight_mean, r->weight_zero, r->lambda, r->loss, r->grad_norm, r->sample_s,
                                       r->train_s};
    qs_rl_writer *w = qs_rl_writer_open(db, run_id, e);
    int rc = w ? qs_rl_writer_rows(w, rows, n, e) : -1;
    if (w) qs_rl_writer_close(w);
    if (!rc) rc = put_seqs(db, run_id, o, r->step, prompts, e);
    if (!rc) rc = qs_rl_step_put(db, run_id, r->step, v, e);
    if (!rc) rc = qs_rl_underflow_put(db, run_id, r->step, r->uf, r->uf_layers, e);
    return rc;
}

static int on_step(void *p, const qs_grpo_llm_step *r, const qs_rl_row *rows, size_t n,
                   const char (*prompts)[QS_RL_TASK_PROMPT_MAX], qs_err *e)
{
    run_ctx *C = p;
    if (!C->seen++) C->r_first = r->reward;
    C->r_last = r->reward;
    if (C->db) {
        if (qs_db_begin(C->db, e)) return -1;
        if (qs_rl_grpo_put_step(C->db, C->run_id, C->o, r, rows, n, prompts, e) || qs_db_commit(C->db, e)) {
            qs_db_rollback(C->db);
            return -1;
        }
    }
    if (C->o->json) json_array_append_new(C->steps, step_json(r));
    else if (!C->o->quiet) {
        if (C->seen == 1) printf("%5s  %7s  %6s  %7s  %9s  %9s  %7s  %8s  %6s\n", "step", "reward", "len", "entropy",
                                 "kl_init", "k3", "w_mean", "loss", "s");
        printf("%5d  %7.4f  %6.2f  %7.4f  %9.3g  %9.3g  %7.4f  %8.4f  %6.2f\n", r->step, r->reward, r->resp_len,
               r->entropy, r->kl_init, r->mismatch_k3, r->weight_mean, r->loss, r->sample_s + r->train_s);
        fflush(stdout);
    }
    return 0;
}

char *qs_rl_grpo_metadata(const gopts *o, const qs_llm_file *f, const char *model, const char *policy_set,
                          const char *sweep)
{
    json_t *m = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:I}", "schema", "mmlog-v1", "producer",
                          "qscope rl grpo", "tool_version", QS_VERSION, "task", qs_rl_task_name(o->c.task), "rollout_format",
                          o->roll.label, "trainer", o->trainer_name, "correction", qs_ais_method_name(o->c.method),
                          "prompts", o->c.B, "group", o->c.G, "max_new", o->c.max_new, "steps", o->c.steps, "seed",
                          (json_int_t)o->c.seed);
    if (!m) return NULL;
    qs_json_add_nums(m, "temp", o->c.temp, "lr", o->c.lr, "clip", o->c.clip, "kl_coef", o->c.kl_coef, (const char *)NULL);
    qs_json_set_text(m, "model", model);
    qs_json_set_text(m, "model_hash", f->hash);
    if (policy_set) qs_json_set_text(m, "default_policy", policy_set);
    if (sweep) qs_json_set_text(m, "sweep", sweep);
    char *aj = qs_ais_opts_json(&o->c.ais);
    json_object_set_new(m, "ais_options", aj ? json_loads(aj, 0, NULL) : json_null());
    free(aj);
    json_object_set_new(m, "columns", json_string("lp_rollout = the sampled token's log-prob under the rollout numerics, "
                                                   "lp_train = under the trainer's recipe (teacher-forced, before the "
                                                   "step's update), entropy = rollout entropy, reward/advantage per sequence"));
    char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(m);
    return s;
}

/* The tokenizer of the policy checkpoints `llm logits --model DIR` loads: the model directory's, or a
** byte-level one. */
static qs_llm_save_tok policy_tok(const char *model, const qs_llm_file *f)
{
    char tj[1200];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", model);
    struct stat sb;
    int hf = stat(model, &sb) == 0 && S_ISDIR(sb.st_mode) && access(tj, F_OK) == 0;
    return (qs_llm_save_tok){hf ? model : NULL, !hf && f->m.c.vocab == 256, f->v.bos, f->v.eos};
}

/* QSCOPE_TEST_STEP_DELAY_MS=N: sleep N ms after each step, so that the tests' signals and kills land
** mid-run however fast the steps are (a test hook, as cmd_train.c's; results unchanged). */
static void test_step_delay(void)
{
    const char *v = getenv("QSCOPE_TEST_STEP_DELAY_MS");
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms > 0 && ms <= 10000) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* After each step: the checkpoint into --out every --checkpoint-every steps, at the last step and when
** the run ends, stopped or not (after the step's rows are committed, so a checkpoint never runs ahead of the
** database; rows beyond it are recomputed by --resume). */
static int on_ckpt(void *p, const qs_llm_model *m, const qs_grpo_llm_state *s, qs_err *e)
{
    run_ctx *C = p;
    int rc = 0;
    if (C->o->out && s->step != C->written && (s->step % C->st.ckpt_every == 0 || s->final)) {
        C->written = s->step;
        qs_grpo_ckpt_state st = C->st;
        st.step = s->step;
        st.adam_t = s->opt->t;
        st.lambda = s->lambda;
        st.calls = s->calls;
        st.calls0 = s->calls0;
        rc = qs_ckpt_write(C->o->out, m, &C->tok, s->opt, QS_GRPO_STATE_FILE, qs_grpo_state_write, &st, e);
    }
    if (!s->final) test_step_delay();
    return rc;
}

/* ---------------------------------------------------------------- the command */

int qs_rl_grpo_run_name(const gopts *o, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s/%s/%s/%s/%s/s%llu", o->name, qs_rl_task_name(o->c.task), o->roll.label, o->trainer_name,
                    qs_ais_method_name(o->c.method), (unsigned long long)o->c.seed) >= (int)cap;
}

static void print_end(const gopts *o, const run_ctx *C, const char *run, const char *model, const qs_grpo_policy *pol,
                      int done, int stored)
{
    if (o->json) {
        json_t *j = json_pack("{s:i,s:i,s:b}", "steps_done", done, "steps", o->c.steps, "stored", stored);
        qs_json_set_text(j, "run", run);
        qs_json_set_text(j, "model", model);
        qs_json_set_text(j, "task", qs_rl_task_name(o->c.task));
        qs_json_set_text(j, "rollout", o->roll.label);
        qs_json_set_text(j, "trainer", o->trainer_name);
        qs_json_set_text(j, "correction", qs_ais_method_name(o->c.method));
        if (pol) qs_json_add_nums(j, "pretrain_s", pol->trained ? pol->secs : NAN, (const char *)NULL);
        qs_json_add_nums(j, "reward_first", done ? C->r_first : NAN, "reward_last", done ? C->r_last : NAN, (const char *)NULL);
        json_object_set_new(j, "step_records", json_incref(C->steps));
        char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
        if (s) puts(s);
        free(s);
        json_decref(j);
        return;
    }
    if (!o->quiet && done)
        printf("rl grpo: %d step%s, reward %.4f (step 0) -> %.4f (step %d)%s%s\n", done, done == 1 ? "" : "s", C->r_first,
               C->r_last, done - 1, stored ? "; stored as run " : "", stored ? qs_esc(run) : "");
}

/* --resume DIR: the run's options are the checkpoint's, and what the command line gives must agree with
** them (exit 2 otherwise); o is parsed again from both. */
static int resume_opts(gopts *o, const qs_grpo_ckpt_state *rs, int argc, char **argv)
{
    const char *dir = o->resume, *model = o->model;
    int json = o->json, quiet = o->quiet, every = o->ckpt_every;
    if (o->replace || o->no_store) return qs_cli_usage(CMD, "--resume continues its run: no --replace or --no-store");
    if (o->out && strcmp(o->out, dir)) return qs_cli_usage(CMD, "--resume writes its checkpoints into %s: no other --out", dir);
    if (model) {
        char *a = realpath(model, NULL);
        int same = a && rs->model && !strcmp(a, rs->model);
        free(a);
        if (!same) return qs_cli_usage(CMD, "--model %s is not the model of the run in %s", model, dir);
    }
    char **v1 = calloc((size_t)rs->nargs + 1, sizeof *v1), **v2 = calloc((size_t)(rs->nargs + argc), sizeof *v2);
    gopts o1;
    int rc = !v1 || !v2 ? qs_cli_error(QS_EXIT_ERR, "out of memory") : 0;
    if (!rc) {
        v1[0] = v2[0] = argv[0];
        for (int i = 0; i < rs->nargs; i++) v1[1 + i] = v2[1 + i] = rs->args[i];
        for (int i = 1; i < argc; i++) v2[rs->nargs + i] = argv[i];
        gopts_free(o);
        rc = parse(1 + rs->nargs, v1, &o1);
        if (!rc) rc = parse(rs->nargs + argc, v2, o);
        if (rc) gopts_free(&o1);
    }
    if (!rc) {
        char r1[512], r2[512];
        static qs_llm_file nof;   /* no model: the settings alone */
        char *m1 = qs_rl_grpo_metadata(&o1, &nof, "", NULL, NULL), *m2 = qs_rl_grpo_metadata(o, &nof, "", NULL, NULL);
        qs_rl_grpo_run_name(&o1, r1, sizeof r1);
        qs_rl_grpo_run_name(o, r2, sizeof r2);
        if (!m1 || !m2) rc = qs_cli_error(QS_EXIT_ERR, "out of memory");
        else if (strcmp(r1, r2) || strcmp(m1, m2) || o->c.steps != rs->steps)
            rc = qs_cli_usage(CMD, "the options conflict with the run in %s (%s/%s): give none or the same", dir,
                              qs_esc(dir), QS_GRPO_STATE_FILE);
        free(m1);
        free(m2);
        gopts_free(&o1);
    }
    free(v1);
    free(v2);
    o->resume = o->out = dir;
    o->model = rs->model;
    o->json = json;
    o->quiet = quiet;
    o->ckpt_every = every ? every : rs->ckpt_every;
    o->no_store = rs->run_name == NULL;
    return rc;
}

/* The database side of a run: a new rl_run, or (--resume) the stored one with the rows of the steps
** after the checkpoint deleted. */
static int open_run(const gopts *o, const qs_grpo_ckpt_state *rs, const char *run, const qs_llm_file *f0,
                    const char *model, const char *polset, run_ctx *C, qs_err *e)
{
    if (o->resume) {
        int k = qs_rl_run_reopen(C->db, run, rs->step, &C->run_id, e);
        if (!k) qs_fail(e, "%s: run %s of the checkpoint is not in the database", o->resume, qs_esc(run));
        return k == 1 ? 0 : -1;
    }
    char *meta = qs_rl_grpo_metadata(o, f0, model, o->model ? NULL : polset, NULL);
    int rc = meta ? qs_db_begin(C->db, e) : qs_fail(e, "out of memory");
    if (!rc) rc = qs_rl_run_create(C->db, run, "qscope rl grpo", model, meta, o->replace, &C->run_id, e);
    if (!rc) rc = qs_db_commit(C->db, e);
    else qs_db_rollback(C->db);
    free(meta);
    return rc;
}

/* --out: the checkpoint's fixed part, and (a new run) its step-0 checkpoint, so that a run killed before
** its first checkpoint can be resumed too. */
static int ckpt_begin(const gopts *o, const char *run, const char *model, const qs_llm_file *f0, const qs_llm_file *f,
                      run_ctx *C, qs_err *e)
{
    qs_grpo_ckpt_state *st = &C->st;
    memset(st, 0, sizeof *st);
    if (!o->out) return 0;
    st->steps = o->c.steps;
    for (int i = 0; i < o->nargs; i++) st->args[i] = o->args[i];
    st->nargs = o->nargs;
    st->model = o->model ? realpath(o->model, NULL) : NULL;
    st->init_dir = realpath(model, NULL);
    snprintf(st->init_hash, sizeof st->init_hash, "%s", f0->hash);
    st->run_name = C->db ? (char *)run : NULL;
    st->ckpt_every = o->ckpt_every ? o->ckpt_every : 10;
    C->tok = policy_tok(model, f0);
    if (!st->init_dir || (o->model && !st->model)) return qs_fail(e, "%s: cannot resolve its path", model);
    if (o->resume) return 0;
    qs_adamw z;
    if (qs_adamw_new(&z, &f->m, e)) return -1;
    int rc = qs_ckpt_write(o->out, &f->m, &C->tok, &z, QS_GRPO_STATE_FILE, qs_grpo_state_write, st, e);
    qs_adamw_free(&z);
    return rc;
}

/* The policy to train: the checkpoint's weights and moments (--resume), else the initial policy's. */
static int load_policy(const gopts *o, const qs_grpo_ckpt_state *rs, const char *model, qs_llm_file *f0,
                       qs_llm_file *f, qs_adamw *opt, int *has_opt, qs_err *e)
{
    if (qs_llm_load(model, f0, e)) return -1;
    if (o->resume && strcmp(f0->hash, rs->init_hash)) {
        qs_llm_file_free(f0);
        return qs_fail(e, "%s: the initial policy of the run in %s has changed (hash %s, the checkpoint's %s)", model,
                       o->resume, f0->hash, rs->init_hash);
    }
    if (qs_llm_load(o->resume ? o->resume : model, f, e)) { qs_llm_file_free(f0); return -1; }
    if (!o->resume) return 0;
    int rc = f->m.arena_len != f0->m.arena_len || f->m.bias_len != f0->m.bias_len
                 ? qs_fail(e, "%s: the checkpoint's model does not have the initial policy's shape", o->resume)
                 : qs_adamw_new(opt, &f->m, e);
    if (!rc) {
        *has_opt = 1;
        rc = qs_train_ckpt_read_opt(o->resume, &f->m, opt, e);
        opt->t = rs->adam_t;
        if (!rc && !f0->m.c.rope_neox) rc = qs_train_ckpt_adjacent(&f->m, opt, e);
    }
    if (rc) { qs_llm_file_free(f); qs_llm_file_free(f0); }
    return rc;
}

static int cmd_grpo(qs_cli *cli, int argc, char **argv)
{
    gopts o;
    qs_grpo_ckpt_state rs;
    memset(&rs, 0, sizeof rs);
    qs_err e = {{0}};
    int rc = parse(argc, argv, &o);
    if (!rc && o.resume) {
        if (qs_grpo_state_read(o.resume, &rs, &e)) { gopts_free(&o); return qs_cli_err(QS_EXIT_ERR, &e); }
        rc = resume_opts(&o, &rs, argc, argv);
    }
    if (!rc && o.sweep) rc = qs_rl_grpo_sweep(cli, &o);
    if (rc || o.sweep) { gopts_free(&o); qs_grpo_state_free(&rs); return rc; }
    if (qs_par_size() > 1) {   /* one run is not sharded: rank 0 runs it alone */
        if (qs_par_rank() > 0) { gopts_free(&o); qs_grpo_state_free(&rs); return 0; }
        qs_par_alone();
    }
    char run[512];
    if (qs_rl_grpo_run_name(&o, run, sizeof run)) { rc = qs_cli_usage(CMD, "--name: the run name is too long"); goto out_o; }
    if (o.resume && rs.run_name && strcmp(run, rs.run_name)) {
        rc = qs_cli_error(QS_EXIT_ERR, "%s/%s: run_name %s is not the run of its options", o.resume, QS_GRPO_STATE_FILE,
                          qs_esc(rs.run_name));
        goto out_o;
    }
    if (o.out && o.model && !strcmp(o.out, o.model)) { rc = qs_cli_usage(CMD, "--out must not be the --model directory"); goto out_o; }
    if (o.out && !o.resume && qs_train_out_check(o.out, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out_o; }
    qs_db *db = NULL;
    if (!o.no_store) {
        if (!(db = qs_cli_open_db(cli))) { rc = QS_EXIT_ERR; goto out_o; }
        int exists = 0;
        if (!o.resume && qs_run_exists(db, run, &exists, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out_db; }
        if (exists && !o.replace) {
            rc = qs_cli_error(QS_EXIT_ERR, "run '%s' exists (--replace to overwrite, --name for another prefix)", qs_esc(run));
            goto out_db;
        }
    }
    /* the policy: --model, or the default one (pre-trained once); resumed: the checkpoint's initial one */
    qs_grpo_policy pol;
    memset(&pol, 0, sizeof pol);
    char polset[512] = "";
    const char *model = o.resume ? rs.init_dir : o.model;
    if (!model) {
        if (qs_grpo_policy_get(o.c.task, o.quiet || o.json, &pol, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out_db; }
        if (pol.trained && !o.quiet)
            fprintf(stderr, "qscope: default policy pre-trained in %.1f s (%d steps, validation loss %.4f)\n", pol.secs,
                    pol.steps, pol.val_loss);
        model = pol.dir;
        qs_grpo_policy_settings(o.c.task, polset, sizeof polset);
    }
    qs_llm_file f0, f;
    qs_adamw opt;
    int has_opt = 0;
    if (load_policy(&o, &rs, model, &f0, &f, &opt, &has_opt, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto out_db; }
    o.c.vocab = &f0.v;
    run_ctx C = {&o, db, 0, o.json ? json_array() : NULL, NAN, NAN, 0, -1, {0}, {0}};
    if (qs_grpo_llm_check(&f.m, &o.c, &e)) {
        qs_err_prefix(&e, model);
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto out_f;
    }
    if ((db && open_run(&o, &rs, run, &f0, model, polset, &C, &e)) || ckpt_begin(&o, run, model, &f0, &f, &C, &e)) {
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto out_f;
    }
    if (!o.quiet && !o.json)
        printf("rl grpo: %s, task %s, %d prompts x %d samples, %d new tokens, rollout %s, trainer %s, correction %s%s\n",
               qs_esc(model), qs_rl_task_name(o.c.task), o.c.B, o.c.G, o.c.max_new, o.roll.label, o.trainer_name,
               qs_ais_method_name(o.c.method), o.resume ? "; resumed" : "");
    g_stop = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int done = 0;
    qs_grpo_llm_state from = {rs.step, rs.lambda, rs.calls, rs.calls0, has_opt ? &opt : NULL, 0};
    rc = qs_grpo_llm_run_from(&f.m, &f0.m, &o.c, o.resume ? &from : NULL, on_step, on_ckpt, &C, &g_stop, &done, &e);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (rc) {
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        if (done) fprintf(stderr, "qscope: %d completed step%s kept in run %s\n", done, done == 1 ? "" : "s", qs_esc(run));
        goto out_f;
    }
    print_end(&o, &C, run, model, o.model || o.resume ? NULL : &pol, done, db != NULL);
    if (g_stop) {
        fprintf(stderr, "qscope: stopped after %d step%s (%s%s%s)\n", done, done == 1 ? "" : "s",
                db ? "kept" : "nothing stored", o.out ? "; continue with --resume " : "", o.out ? qs_esc(o.out) : "");
        rc = 128 + (int)g_stop;
    }
out_f:
    free(C.st.model);
    free(C.st.init_dir);
    json_decref(C.steps);
    if (has_opt) qs_adamw_free(&opt);
    qs_llm_file_free(&f);
    qs_llm_file_free(&f0);
out_db:
    qs_db_close(db);
out_o:
    gopts_free(&o);
    qs_grpo_state_free(&rs);
    return rc;
}

/* `rl text`: a task's solved examples, the text the default policy is pre-trained on (another seed). */
static int cmd_text(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    static const struct option lo[] = {{"task", 1, 0, G_TASK}, {"lines", 1, 0, G_STEPS}, {"seed", 1, 0, G_SEED}, {0, 0, 0, 0}};
    int task = QS_RL_TASK_ARITH, lines = 1000, ch;
    unsigned long long seed = 0;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        switch (ch) {
        case G_TASK:
            if ((task = qs_rl_task_find(optarg)) < 0)
                return qs_cli_usage("rl text", "--task: unknown task '%s' (%s)", optarg, QS_RL_TASK_NAMES);
            break;
        case G_STEPS: if (qs_cli_parse_int("rl text", "--lines", optarg, 0, 1 << 24, &lines)) return QS_EXIT_USAGE; break;
        case G_SEED: if (qs_parse_u64(optarg, &seed)) return qs_cli_usage("rl text", "bad --seed '%s'", optarg); break;
        case ':': return qs_cli_usage("rl text", "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage("rl text", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage("rl text", "unexpected argument '%s'", argv[optind]);
    char buf[64 * 1024];
    for (int i = 0; i < lines; i += 1000) {   /* blocks of 1000 lines of problems i .. i+999 */
        int n = lines - i < 1000 ? lines - i : 1000;
        char one[QS_RL_TASK_PROMPT_MAX], ans[QS_RL_TASK_ANSWER_MAX];
        size_t o = 0;
        for (int k = 0; k < n; k++) {
            qs_rl_task_prompt((qs_rl_task)task, seed, (uint64_t)(i + k), one, ans);
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s\n", one + 1, ans);
        }
        if (fwrite(buf, 1, o, stdout) != o) return qs_cli_error(QS_EXIT_ERR, "stdout: write failed");
    }
    return fflush(stdout) ? qs_cli_error(QS_EXIT_ERR, "stdout: write failed") : 0;
}

const qs_subcommand qs_rl_subcommands[] = {
    {"grpo", "GRPO on a transformer: quantized rollouts, a trainer in any recipe, IS corrections; stored\n"
             "            as an rl_run plus per-step metrics; --sweep SPEC: many runs, over MPI ranks\n", cmd_grpo, 1,
     "[--model PATH] [--task T] [--rollout SPEC] [--trainer RECIPE] [--correction M] [options]", QS_RL_OPTS},
    {"text", "[--task T] [--lines N (1000)] [--seed S (0)]: the task's solved examples (\"7+5=12\" lines) on\n"
             "            stdout, e.g. for `qscope train --text` to pre-train a policy of your own\n", cmd_text, 0,
     "[--task T] [--lines N] [--seed S]", QS_RL_TEXT_OPTS},
    {NULL, NULL, NULL, 0, NULL, NULL}};
