/*
** The help of `qscope llm SUB` (`qscope help llm SUB`, `qscope llm SUB --help`): each subcommand's
** synopsis and the options it takes, kept here next to each other so that a new option goes into
** its subcommand's list (tests/e2e/help_sub.sh fails when an option a parser accepts is missing).
** The rows of qs_llm_subcommands (app/cli/cmd_llm.c) point at these.
*/
#ifndef QS_LLM_HELP_H
#define QS_LLM_HELP_H

/* option lines shared by several subcommands */
#define QS_LLM_H_MODEL \
    "  --model PATH        GGUF file (llama or qwen2; any tensor type, e.g. F32/F16/BF16 or Q4_1) or a\n" \
    "                      Hugging Face directory (config.json, *.safetensors, tokenizer.json)\n"
#define QS_LLM_H_NUMERICS \
    "  --rollout-format F  weights format (fp32 = none), e.g. mxfp4, nvfp4, hif4, fp8_e4m3, bf16;\n" \
    "                      per-format options as in `analyze -f`, e.g. mxfp4:scale-rule=rceil\n" \
    "  --act-format F      inputs of every linear layer, per token (default fp32)\n" \
    "  --kv-format F       K (after RoPE) and V rows written to the KV cache (default fp32)\n" \
    "  --resq none|dense|2:4  Rollout-ResQ residual correction of the activation rounding\n" \
    "  --unscaled-casts    plain casts (fp8_*, fp6_*, fp4_e2m1, hif8) without the default per-row\n" \
    "                      FP32 scale (per output channel for weights, per token for activations)\n"
#define QS_LLM_H_PROMPT \
    "  --prompt TEXT       prompt text (UTF-8), tokenized with the model's BPE vocabulary and merges\n" \
    "  --chat              wrap --prompt in the model's ChatML template (system, user, assistant)\n" \
    "  --prompt-ids LIST   prompt as comma-separated token ids\n"
#define QS_LLM_H_SEED "  --seed S            sampling seed (default 0)\n"
#define QS_LLM_H_EVALTEXT \
    "  --model PATH        GGUF file or Hugging Face directory (default: make data's\n" \
    "                      data/models/SmolLM2-135M-Instruct.Q4_1.gguf)\n" \
    "  --text FILE         the text (default data/text/persuasion.txt: 107,749 SmolLM2 tokens, 210\n" \
    "                      chunks of 512)\n" \
    "  --ctx N             tokens per chunk (default 512; at most the model's context)\n" \
    "  --chunks K          the first K chunks only (default: all of the text; SmolLM2-135M on 2 cores\n" \
    "                      takes ~1.6 s per chunk of 512 for the reference and for each configuration,\n" \
    "                      ~6 minutes each over all 210 chunks)\n" \
    "  --score half|all    score the second half of each chunk (half, llama.cpp's default) or all\n" \
    "                      positions\n"

#define QS_LLM_SCORE_ARGS "--model PATH [numerics] [--task open|arith] [--tokens N] [--seqs K] [--prompts P] [--seed S] [--name RUN] [--json]"
#define QS_LLM_SCORE_OPTS \
    QS_LLM_H_MODEL QS_LLM_H_NUMERICS \
    "  --tokens N          generated tokens per sequence (default 64)\n" \
    "  --seqs K            sequences per prompt (default 4)\n" \
    "  --prompts P         prompts (default 2; the default prompts are the chat openings\n" \
    "                      <|im_start|>assistant\\n, ...user\\n, ...system\\n)\n" \
    "  --task open|arith   arith = chat prompts 'What is A + B?' (A, B in 1..9) with reward 1/0 and\n" \
    "                      advantage = reward - group mean; open (default) leaves them NULL\n" \
    QS_LLM_H_PROMPT QS_LLM_H_SEED \
    "  --name RUN          the stored run's name\n" \
    "  --json              the score summary as JSON\n" \
    "(without --rollout-format, --act-format or --kv-format the rollout is the FP32 reference itself)"

#define QS_LLM_CAPTURE_ARGS "--model PATH [--tokens N] [--seed S] [--prefix P] [--sites linear|all] [--prompt TEXT [--chat] | --prompt-ids LIST]"
#define QS_LLM_CAPTURE_OPTS \
    QS_LLM_H_MODEL \
    "  --tokens N          sampled tokens after the prompt (default 64)\n" \
    QS_LLM_H_SEED \
    "  --prefix P          tensor-name prefix (default llm-act)\n" \
    "  --sites linear|all  linear (default): the four linear inputs; all adds k, v and resid\n" \
    QS_LLM_H_PROMPT \
    "(the FP32 reference only: no format options)"

#define QS_LLM_GENERATE_ARGS "--model PATH [numerics] [--tokens N] [--seqs K] [--seed S] [--prompt TEXT [--chat] | --prompt-ids LIST] [--temp T] [--top-k K] [--top-p P] [--greedy]"
#define QS_LLM_GENERATE_OPTS \
    QS_LLM_H_MODEL QS_LLM_H_NUMERICS \
    "  --tokens N          tokens per sequence (default 64)\n" \
    "  --seqs K            sequences (default 4)\n" \
    QS_LLM_H_SEED QS_LLM_H_PROMPT \
    "  --temp T            divide the logits by T (default 1; 0 = greedy)\n" \
    "  --top-k K           keep the K most likely tokens (0 = all)\n" \
    "  --top-p P           keep the smallest prefix of those whose probability reaches P (default 1)\n" \
    "  --greedy            always the most likely token"

#define QS_LLM_LOGITS_ARGS "--model PATH (--prompt-ids LIST | --prompt TEXT [--chat]) -o OUT.npy [numerics]"
#define QS_LLM_LOGITS_OPTS \
    QS_LLM_H_MODEL QS_LLM_H_PROMPT \
    "  -o, --out OUT.npy   the logits, float32, tokens x vocabulary\n" \
    QS_LLM_H_NUMERICS

#define QS_LLM_BENCH_ARGS "--model PATH [numerics] [--tokens N] [--seqs K] [--reps R] [--seed S] [--eval-ctx N] [--eval-chunks K]"
#define QS_LLM_BENCH_OPTS \
    QS_LLM_H_MODEL QS_LLM_H_NUMERICS \
    "  --tokens N          generated tokens per sequence (default 64)\n" \
    "  --seqs K            sequences decoding together (default 4)\n" \
    "  --reps R            best of R repetitions (default 3)\n" \
    QS_LLM_H_SEED \
    "  --eval-ctx N        the eval case's context (default 512, or the model's if shorter; 0 skips it)\n" \
    "  --eval-chunks K     the eval case's chunks (default 2)"

#define QS_LLM_TOKENIZE_ARGS "(--model PATH | --tokenizer PATH) (--prompt TEXT [--chat] | --text FILE|-) [--threads N] [--lopt-chunk BYTES] [--lopt-overlap BYTES] [--json | --npy FILE]"
#define QS_LLM_TOKENIZE_OPTS \
    QS_LLM_H_MODEL \
    "  --tokenizer PATH    the tokenizer alone, no weights: a tokenizer.json, a SentencePiece\n" \
    "                      tokenizer.model, a BERT vocab.txt, a Hugging Face directory (its\n" \
    "                      tokenizer.json, else its tokenizer.model) or a .gguf (its tokenizer.*\n" \
    "                      keys alone, any architecture; no weights are read)\n" \
    "  --prompt TEXT       the text (UTF-8)\n" \
    "  --chat              wrap --prompt in the model's ChatML template first\n" \
    "  --text FILE         the text from a file, or - for standard input (at most 1 GiB; any bytes)\n" \
    "  --threads N         LoPT on N threads (1..64; default: every core); 1 = the sequential\n" \
    "                      tokenizer.  The ids are the same for every N (docs/tokenize.md: LoPT's\n" \
    "                      merge, its proof, and the tokenizers it does not cover, which run\n" \
    "                      sequentially)\n" \
    "  --lopt-chunk BYTES  bytes per chunk (default 65536 for any thread count; 16..1 GiB)\n" \
    "  --lopt-overlap BYTES  bytes of overlap at each chunk boundary, where the anchor is sought\n" \
    "                      (default 64, or the chunk length - 1 if smaller; doubled where it holds no\n" \
    "                      anchor; a given one must be below --lopt-chunk)\n" \
    "  --json              {source, tokenizer, bytes, count, threads, lopt: {chunks, anchors, regrown,\n" \
    "                      fallback, why}, tokens: [{id, bytes: [start, end], chars: [start, end]}]}\n" \
    "  --npy FILE          the ids as a 1-D int32 .npy (nothing on stdout without --json)\n" \
    "(default output: the ids comma-separated on one line; with --text a summary line on stderr)"

#define QS_LLM_TEXT_ARGS "--rdb Rdata.rdb [--rdx Rdata.rdx] -o DIR [--json]"
#define QS_LLM_TEXT_OPTS \
    "  --rdb FILE          the package's Rdata.rdb (serialized, compressed R objects)\n" \
    "  --rdx FILE          its index (default: Rdata.rdx next to --rdb)\n" \
    "  -o DIR              the output directory (created when missing)\n" \
    "  --json              what was written, as JSON"

#define QS_LLM_IMATRIX_ARGS "--model PATH --text FILE -o FILE [--format gguf|dat] [--ctx N] [--chunks K] [--process-output] | --show FILE"
#define QS_LLM_IMATRIX_OPTS \
    "  --model PATH        GGUF file or Hugging Face directory (weights read in FP32)\n" \
    "  --text FILE         the calibration text, tokenized as llm eval does (BOS first when the\n" \
    "                      tokenizer adds it); at least two chunks of --ctx tokens\n" \
    "  --ctx N             tokens per chunk (default 512, as llama-imatrix; at least 16); the first\n" \
    "                      token of each chunk is replaced by BOS\n" \
    "  --chunks K          the first K chunks only (default: all of the text)\n" \
    "  -o, --out FILE      where to write the matrix (overwritten)\n" \
    "  --format gguf|dat   llama-imatrix's GGUF format (raw sums NAME.in_sum2 and token counts\n" \
    "                      NAME.counts) or its legacy .dat (sum / count * ncall); default: dat for a\n" \
    "                      name ending in .dat, else gguf\n" \
    "  --process-output    also collect the output projection's input (an untied output.weight\n" \
    "                      only), as llama-imatrix --process-output\n" \
    "  --show FILE         list the entries of an imatrix file (either format): columns, matrices,\n" \
    "                      tokens or ncall, and the mean importance llama-quantize would use\n"

#define QS_LLM_EVAL_ARGS "[--model PATH] [--text FILE] [--ctx N] [--chunks K] [--config SPEC]... [--plan FILE]... [--score half|all] [--until-ci X|kl:X] [--ci delta|bootstrap[:N[:SEED]]] [--paired] [--csv [FILE]] [--unscaled-casts] [--weights mapped|f32|auto] [--calib FILE [--calib-chunks N]] [--force] [--save-ids FILE] [--json]"
#define QS_LLM_EVAL_OPTS \
    QS_LLM_H_EVALTEXT \
    "  --config SPEC       (repeatable) a configuration w=F,a=F,kv=F,resq=none|dense|2:4 (weights,\n" \
    "                      linear-layer inputs per token, K/V cache rows; omitted parts stay FP32),\n" \
    "                      e.g. a=mxfp4 or w=nvfp4,kv=fp8_e4m3; F takes -f's options: a cast's\n" \
    "                      :scale=tensor|row|col on w=, only :scale=row on a= and kv=; a repeated\n" \
    "                      configuration is evaluated once.  None: the reference alone.\n" \
    "                      w=F:imatrix=FILE (last in the spec; F one of llama.cpp's types with\n" \
    "                      importances, e.g. q4_k, iq4_xs): each weight rounded with its entry of a\n" \
    "                      llama.cpp importance matrix (`llm imatrix`, or llama-imatrix's .gguf/.dat)\n" \
    "                      as llama-quantize --imatrix; the file's hash is in the stored key.\n" \
    "                      Transforms\n" \
    "                      (reconstructions of their papers, exact in FP32; docs/llm.md):\n" \
    "                      rot=hadamard[:seed=N][:down=0][:vo=0] QuaRot: RMSNorms folded, the residual\n" \
    "                      stream rotated in the weights, per-head V/O, the online Hadamard before\n" \
    "                      down_proj (seed: random signs); rot=random[:seed=N] SpinQuant's random\n" \
    "                      orthogonal start; rht=16[:seed=N] the NVFP4 recipe's 16-point random\n" \
    "                      Hadamard transform of both operands of every linear layer.\n" \
    "                      Calibration transforms (with --calib; reconstructions of the papers,\n" \
    "                      docs/llm.md \"Calibration transforms\"): smooth=ALPHA[:norm] SmoothQuant's\n" \
    "                      scales folded into the norms and V/up rows (:norm: the norm sites only);\n" \
    "                      w=F:gptq[:act-order][:damp=0.01][:gblock=128] GPTQ rounding (block\n" \
    "                      scales fixed at a block's first column); w=F:awq[:grid=20] AWQ's scales\n" \
    "  --plan FILE         (repeatable) a plan file of `llm sensitivity --formats` as one configuration\n" \
    "                      (per layer and site its format; label plan:NAME@HASH of the file); a plan\n" \
    "                      for another model or shape is refused\n" \
    "  --calib FILE        the calibration text of the transforms (never the evaluation text): the\n" \
    "                      FP32 model's linear inputs there give max|x|, mean|x| and GPTQ's Hessians\n" \
    "  --calib-chunks N    calibration chunks of --ctx tokens (default 8)\n" \
    "  --until-ci X|kl:X   chunk after chunk (up to --chunks, or the whole text) until every config's\n" \
    "                      dPPL 95% interval is narrower than X (0.01 = 1 point; kl:X the KL mean's,\n" \
    "                      nats; at least 2 chunks).  Every finished chunk is stored as it finishes:\n" \
    "                      Ctrl-C keeps them, the same command (or a larger --chunks) goes on\n" \
    "  --ci delta|bootstrap[:N[:SEED]]  +- per token (default: tokens treated as independent) or\n" \
    "                      95% intervals by a bootstrap over whole chunks (N = 1000 resamples, seed 1)\n" \
    "  --paired            every config against the first on the same tokens: d ln PPL and d KL mean\n" \
    "                      with a 95% interval over chunks and whether it excludes 0.  No interval\n" \
    "                      covers the 0.1-0.2% PPL 'draws' of activation/KV rounding\n" \
    "  --csv [FILE]        one row per variant (to stdout: instead of the table)\n" \
    "  --unscaled-casts    plain casts without the default per-row FP32 scale (raw casts are\n" \
    "                      `analyze`'s default: FP8 E4M3 overflows to NaN past 448)\n" \
    "  --weights mapped|f32|auto  how the weights are held: FP32 copies in memory, or left in the\n" \
    "                      file's type (BF16, F16, Q8_0, Q4_K, ...; GGUF or safetensors) and read there,\n" \
    "                      widened a panel at a time inside the products (the same results to the\n" \
    "                      last bit; for models larger than memory; w= rounds a layer at a time).\n" \
    "                      Default auto: mapped when the FP32 copy would take more than half of the\n" \
    "                      memory; the choice is printed, the peak resident set (VmHWM) too\n" \
    "  --force             recompute stored results\n" \
    "  --save-ids FILE     write the text's token ids (to cross-check with other tools)\n" \
    "  --json              the results as JSON\n" \
    "\n" \
    "Example (under a minute on 2 cores): qscope llm eval --chunks 8 --config a=mxfp4 --config kv=fp8_e4m3"

#define QS_LLM_SENS_ARGS "--format F | --formats F1,F2,... --bits B [--plan-out FILE] [--sites LIST] [--model PATH] [--text FILE] [--ctx N] [--chunks K] [--score half|all] [--kl-target X] [--bits-budget B] [--unscaled-casts] [--force] [--json] [--csv [FILE]]"
#define QS_LLM_SENS_OPTS \
    "  --format F          the format (one; -f's options, e.g. mxfp4:scale-rule=rceil)\n" \
    "  --formats LIST      plan across formats (e.g. mxfp4,nvfp4,hif4,fp8_e4m3,bf16): per (layer, site)\n" \
    "                      the format of least summed KL within --bits B average bits per element\n" \
    "                      (weights per parameter, activations/KV per element per token; each\n" \
    "                      format's one-format table reused or computed), by a Lagrangian sweep and a\n" \
    "                      greedy fill; verified by an evaluation, refined when it misses the\n" \
    "                      prediction, compared with each format alone; written as a plan file\n" \
    "  --bits B            the plan's budget (= --bits-budget)\n" \
    "  --plan-out FILE     where the plan goes (default plan-MODELHASH8-Bb.json); `llm eval --plan`\n" \
    "  --sites LIST        attn_in, attn_out, ffn_in, ffn_down_in (linear-layer inputs), kv (K/V cache\n" \
    "                      rows), w (the layer's weight matrices); default all six\n" \
    QS_LLM_H_EVALTEXT \
    "  --kl-target X       plan: the fewest BF16 promotions whose predicted KL is <= X, verified by one\n" \
    "                      evaluation; a plan whose measured KL misses X adds the next cells of the\n" \
    "                      ranking and is verified again, until it meets X or the budget is spent\n" \
    "  --bits-budget B     plan: the most promotions within B average bits (with --kl-target: the\n" \
    "                      refinement's limit; default: every cell may be promoted)\n" \
    "  --unscaled-casts    plain casts without the default per-row FP32 scale\n" \
    "  --force             recompute stored results\n" \
    "  --json              the table, the ranking and the plan as JSON\n" \
    "  --csv [FILE]        one row per layer x site (KL mean, SE, dPPL, same top, rank, BF16 in the plan)\n" \
    "\n" \
    "Cost: (layers x sites / 2 + 1) forward passes per chunk; example (~1.5 minutes on 2 cores):\n" \
    "qscope llm sensitivity --format mxfp4 --sites ffn_down_in,attn_in --ctx 256 --chunks 2 --kl-target 0.05"

#endif
