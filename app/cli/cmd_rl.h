/*
** RL commands: import-log, runs, ais, sim.  Defined in app/cmd_rl*.c.
*/
#ifndef QS_CMD_RL_H
#define QS_CMD_RL_H

#include "cli.h"
#include "../../analysis/ais.h"
#include "../../kernels/llm_recipe.h"

#define QS_IMPORT_LOG_HELP \
    "Reads per-token RL logs in the mmlog v1 schema (docs/rl.md): CSV with one row per token and a\n" \
    "header (step, seq_id, group_id, tok_idx, lp_rollout, lp_train, adv, reward, entropy, mask,\n" \
    "token_id; the first five are required) or JSONL with one sequence per line\n" \
    "({\"step\":..,\"seq_id\":..,\"lp_rollout\":[..],\"lp_train\":[..],...}, an optional first line\n" \
    "{\"schema\":\"mmlog-v1\",...} with run metadata).  The encoding is detected from the content.\n" \
    "Each file becomes one run (default name: the file name without extension).\n" \
    "\n" \
    "The whole file is checked while it streams into the database in one transaction: a missing\n" \
    "field, a non-number, a NaN/Inf or positive log-prob, a duplicated token, sequence or JSON key, a\n" \
    "line over 32 MiB or a truncated last line gives `FILE: line N: what is wrong` and stores\n" \
    "nothing.  |lp_train - lp_rollout| > 20 nats is accepted with a warning.\n" \
    "\n" \
    "  --run NAME     name of the run (one file only)\n" \
    "  --label TEXT   free-text label\n" \
    "  --replace      replace a run of the same name\n" \
    "  --quiet        no warnings\n" \
    "  --json         print what was imported as JSON"

/* AIS-R and correction options shared by `ais` and `sim grpo`; returns 1 if handled, -1 on error. */
enum { O_C = 0x2001, O_TAU, O_KAPPA, O_BETA, O_LMIN, O_LMAX, O_L0, O_LFIX, O_AMP, O_AISIS, O_VETO, O_MIS, O_SEQB, O_GEO,
       O_CLAMP };
#define AIS_LONGOPTS \
    {"C", required_argument, 0, O_C}, {"cap", required_argument, 0, O_C}, {"tau-s", required_argument, 0, O_TAU}, \
    {"kappa", required_argument, 0, O_KAPPA}, {"beta", required_argument, 0, O_BETA}, \
    {"lambda-min", required_argument, 0, O_LMIN}, {"lambda-max", required_argument, 0, O_LMAX}, \
    {"lambda0", required_argument, 0, O_L0}, {"lambda-fixed", required_argument, 0, O_LFIX}, \
    {"amplification", required_argument, 0, O_AMP}, {"ais-is", required_argument, 0, O_AISIS}, \
    {"veto", required_argument, 0, O_VETO}, {"mis-band", required_argument, 0, O_MIS}, \
    {"seq-band", required_argument, 0, O_SEQB}, {"geo-band", required_argument, 0, O_GEO}, \
    {"clamp", required_argument, 0, O_CLAMP}

int qs_rl_ais_opt(const char *cmd, int ch, const char *arg, qs_ais_opts *o, int *band_set);

#define QS_AIS_OPTS_HELP \
    "AIS-R and correction options (defaults from spec ais-rl.md):\n" \
    "  --C X, --cap X      truncation cap of TIS, sequence TIS and AIS-R (2); also sets the MIS\n" \
    "                      bands to [1/X, X] unless given\n" \
    "  --tau-s X           AIS-R severity scale in nats: S = 1 - exp(-mean|delta| / X) (0.05)\n" \
    "  --kappa X           AIS-R amplification penalty: lambda_raw = S R (1 - X Vamp) (0.5)\n" \
    "  --beta X            AIS-R EMA factor over steps (0.9)\n" \
    "  --lambda-min X, --lambda-max X   clip of the smoothed lambda (0, 1)\n" \
    "  --lambda0 raw|zero  EMA start: lambda_raw of the first step (raw, default) or 0\n" \
    "  --lambda-fixed X    hold lambda at X (ablation of the adaptivity)\n" \
    "  --amplification seq|grad   Vamp = 1 - ESS_seq (default) or the gradient-level variant\n" \
    "  --ais-is token|seq  AIS-R IS branch: token weights min(w, C) (default) or min(rho, C)\n" \
    "  --veto X            AIS-R: weight 0 for tokens with w < X (off)\n" \
    "  --mis-band LO,HI    token MIS (IcePop) band (1/C, C)\n" \
    "  --seq-band LO,HI    sequence MIS band (1/C, C)\n" \
    "  --geo-band LO,HI    geometric-mean rejection band (0.999, 1.001)\n" \
    "  --clamp X           safety bound on log-ratios before exp (20)\n"

#define QS_AIS_HELP \
    "Per training step of a stored run (imported with import-log, simulated with sim grpo, or\n" \
    "scored): over valid (mask = 1) tokens, with delta = lp_train - lp_rollout and the IS weight\n" \
    "w = exp(delta) = pi_train / pi_rollout (rho per sequence = exp(sum delta)):\n" \
    "  token and sequence ESS ratio, k1/k2/k3 KL estimates of KL(rollout||train), chi-square (token,\n" \
    "  sequence), mean and max |delta|, rollout/trainer perplexity and log-ppl difference, ppl ratio,\n" \
    "  probability Pearson correlation, weight mean/std/min/max/quantiles, fractions above C and\n" \
    "  below 1/C, ESS of verl's clamped weights, entropy, reward and advantage means;\n" \
    "  AIS-R: reliability R, severity S, amplification Vamp, mixing coefficient lambda (raw and\n" \
    "  EMA-smoothed) -- AIS-R is the PROJECT'S RECONSTRUCTION of AIS (arXiv 2605.13907), whose\n" \
    "  exact formulas are unpublished (docs/rl.md);\n" \
    "  corrections none, tis, seq_tis, mis (IcePop), seq_mis, geo (Geo-RS), ais: the per-token\n" \
    "  effective weights each would apply, summarised (mean, std, min, max, zeroed, truncated, ESS).\n" \
    "Results are stored (kind rl_ais, and trajectories for `qscope plot trajectory`), keyed by the\n" \
    "hash of the run's token data.\n" \
    "\n" \
    "  -m, --method M      correction shown in the table (default ais)\n" \
    "  --json | --csv      every field per step\n" \
    "  --weights [--step S]  per-token CSV: delta and the weight of every method\n" \
    "  --no-store          do not store results\n" \
    "  --plot SET -o FILE.png|-   draw one stored set: overview (k3, 1-ESS, lambda), mismatch\n" \
    "                      (k1, k3, mean |delta|), ess (token, sequence, CV), ais (R, S, Vamp,\n" \
    "                      lambda), weights (mean weight per correction), policy (entropy,\n" \
    "                      reward); PNG with provenance, or the terminal (--width/--height)\n" \
    QS_AIS_OPTS_HELP

#define QS_SIM_ABOUT \
    "The CPU GRPO experiment of spec ais-rl.md section 5: P prompts with random target sequences of T\n" \
    "tokens over a vocabulary of V, reward = correct prefix / T; a linear-softmax policy on fixed\n" \
    "Gaussian features of dimension D; the trainer keeps FP32 weights, the rollout policy uses the\n" \
    "same weights fake-quantized through a registry format (blocks along D; plain FP8 casts get a\n" \
    "per-row scale to the format's maximum unless --wscale says otherwise); GRPO with group-\n" \
    "normalised advantages, PPO clip, token-mean loss, Adam; each token's loss is multiplied by the\n" \
    "method's importance weight (qscope ais).  Every (format, method) runs over the seeds on both\n" \
    "cores; every run is stored (rl_run sim/grpo/FORMAT/METHOD/seedS with mmlog tokens of every\n" \
    "--log-every-th step, result rl_sim with per-step reward, greedy accuracy, entropy, norms, k1/k3,\n" \
    "ESS, lambda ...), and the mean reward curves per format as a trajectory.  Deterministic per seed.\n" \
    "\n" \
    "Methods: exact (rollout = trainer, the baseline), none, tis, seq_tis, icepop (token MIS),\n" \
    "seq_mis, geo_rs, ais_r (AIS-R: the project's reconstruction of AIS, exact formulas unpublished),\n" \
    "ais_r_fixed (lambda held at the mean lambda of the ais_r run of the same seed)."

#define QS_SIM_OPTS \
    "  --formats LIST      rollout formats (fp8_e4m3,hif8,mxfp4,nvfp4,hif4), with :key=value options\n" \
    "  --methods LIST      (exact,none,tis,icepop,seq_mis,geo_rs,ais_r,ais_r_fixed)\n" \
    "  --seeds N           seeds 0..N-1 (10); --seed0 S shifts them\n" \
    "  --steps N (500)  --T N (8)  --prompts P (16)  --vocab V (32)  --dim D (64)\n" \
    "  --batch B (32 prompts per step)  --group G (8 samples per prompt)  --epochs K (1)\n" \
    "  --lr X (0.007)  --sgd  --clip EPS (0.2)  --init X (0.02, std of initial weights)\n" \
    "  --feat-scale X (1)  --rollout-temp X (1, applied to the rollout policy only)\n" \
    "  --wscale auto|none|tensor|row  scaling before an element-format cast (auto: row for FP8-like\n" \
    "                      casts, none for hif8 and block formats)\n" \
    "  --log-every N       store the tokens of every N-th step and the last (50; 0 = none)\n" \
    "  --name PREFIX       run-name prefix (sim)  --replace  replace runs of the same names\n" \
    "  --no-store          compute and print only      -j, --jobs N  threads (2)\n" \
    "  --json              the summary as JSON\n" \
    QS_AIS_OPTS_HELP

#define QS_SIM_HELP QS_SIM_ABOUT

#define QS_RL_TEXT_OPTS \
    "  --task T            arith (default) or add\n" \
    "  --lines N           problems 0 .. N-1 (default 1000)\n" \
    "  --seed S            the problems' seed (default 0)"

#define QS_RL_HELP \
    "Reinforcement learning on a real transformer (issue 27; docs/rl.md, \"GRPO on a transformer\").\n" \
    "`rl grpo` runs GRPO: per step --prompts B problems of a task with a verifiable reward (arith: A+B with\n" \
    "A, B in 1..9; add: 2-digit operands with carries; reward 1 for the exact answer before the first\n" \
    "newline, else 0) x --group G samples of up to --max-new tokens from the ROLLOUT policy (the weights\n" \
    "under --rollout numerics), group-normalised advantages, the TRAINER's log-probs of the same tokens\n" \
    "recomputed teacher-forced by the training forward under --trainer, per-token correction weights w\n" \
    "(--correction, as `qscope ais` computes them; stop-gradient) and one AdamW step on\n" \
    "-(1/N) sum A w log pi over the N response tokens (+ --kl-coef times the k3 KL to the initial\n" \
    "policy, which is reported always).  With no --model the default policy is used: a 2-layer byte-level\n" \
    "model pre-trained once on the task's solved examples (a few seconds to a minute) and kept in\n" \
    "$QSCOPE_CACHE, else $XDG_CACHE_HOME/qscope, else ~/.cache/qscope (policies/TASK-HASH).\n" \
    "Each run is stored as the rl_run PREFIX/TASK/ROLLOUT/TRAINER/CORRECTION/sSEED (its response tokens\n" \
    "with lp_rollout, lp_train, advantage, reward, group, entropy: `qscope ais RUN` and the RL view work\n" \
    "on it) plus one rl_step row per step (reward, response length, entropy, KL to the initial policy,\n" \
    "mismatch k3, weights, lambda, loss, gradient norm, times), each step committed as it completes:\n" \
    "Ctrl-C stops after the step in progress and keeps the completed ones (exit 130); with --out, a\n" \
    "killed or stopped run continues with --resume DIR.  Same settings and seed: the same bits.\n" \
    "AIS-R is the project's reconstruction (docs/rl.md)."

#define QS_RL_OPTS \
    "  --model PATH        a model qscope loads (GGUF or Hugging Face directory); default: the task's\n" \
    "                      default policy (pre-trained once, cached)\n" \
    "  --task T            arith (default) or add\n" \
    "  --prompts B (32)  --group G (8)  --max-new T (8)  --steps N (600)  --temp X (1)  --seed S (0)\n" \
    "  --lr X              AdamW learning rate (2e-4; betas 0.9, 0.999, no weight decay)\n" \
    "  --clip X            gradient-norm clip (1; 0 = off)\n" \
    "  --kl-coef X         weight of the k3 KL to the initial policy in the loss (0)\n" \
    "  --rollout SPEC      rollout numerics w=F,a=F,kv=F,resq=none|dense|2:4 as `llm eval --config`\n" \
    "                      (default: the trainer's forward formats, fwd.w and fwd.x; fp32 for fp32)\n" \
    "  --trainer RECIPE    the trainer's recipe, forward and backward (default fp32; docs/train.md):\n" \
    "                      " QS_LLM_RECIPE_PRESETS "\n" \
    "  --correction M      none (default), tis, icepop, seq_mis, geo_rs, ais_r (also seq_tis)\n" \
    "  --name PREFIX       run-name prefix (rl/grpo)   --replace  overwrite a run of the same name\n" \
    "  --out DIR           checkpoints of the policy: a Hugging Face model directory plus AdamW's moments\n" \
    "                      and grpo_state.json, written atomically at step 0, every --checkpoint-every\n" \
    "                      steps (10) and when the run ends or is stopped\n" \
    "  --resume DIR        continue the run of checkpoint DIR (killed or stopped): its options, its stored\n" \
    "                      run (rows of steps after the checkpoint are recomputed, bit for bit); options\n" \
    "                      given again must agree (exit 2)\n" \
    "  --no-store          store nothing   --json  the run and its step records as JSON   --quiet\n" \
    "  --sweep SPEC        many runs (mpirun -np N: whole runs over the ranks, rank 0 stores them; runs\n" \
    "                      stored whole are skipped, so a re-run fills in): a preset (hif4-rl, ais, resq;\n" \
    "                      3 seeds; 'hif4-rl;seeds=1' a piece of one) or a product such as\n" \
    "                      'rollouts=default|w=mxfp4,a=mxfp4;trainers=fp32,bf16;corrections=none,tis;\n" \
    "                      seeds=1,2,3' (rollouts separated by |, the others by , or |).  Runs are named\n" \
    "                      rl/SWEEP/TASK/ROLLOUT/TRAINER/CORRECTION/sSEED; SWEEP (the preset, or\n" \
    "                      sweep-HASH of the spec) is also rl_run.metadata's \"sweep\" (docs/rl.md)\n" \
    "\n" QS_AIS_OPTS_HELP

extern const qs_subcommand qs_rl_subcommands[];

int qs_cmd_import_log(qs_cli *, int, char **);
int qs_cmd_runs(qs_cli *, int, char **);
int qs_cmd_ais(qs_cli *, int, char **);

#endif
