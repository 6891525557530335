/*
** The command table: one row per command (name, synopsis, summary, help, run; a command with
** subcommands has their table instead of run).  Dispatch, `qscope --help`, `qscope help COMMAND`
** and the usage errors of subcommands are all generated from it, so they cannot drift from what
** exists.  Adding a command is its file and one row here.
*/
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_rl.h"
#include "kernel_cli.h"
#include "quant_opts.h"
#define DEFAULT_REPORT_FORMATS QS_DEFAULT_FORMATS_1 "\n                      " QS_DEFAULT_FORMATS_2

const qs_command qs_commands[] = {
    {"import", "[--copy] [--prefix NAME] [--as DTYPE] [--keep-going] [--json] PATH...",
     "import tensors from .npy, .npz, .safetensors and .gguf files or directories",
     "Imports every tensor of each file (directories are searched recursively for *.npy, *.npz,\n"
     "*.safetensors, *.gguf).  Tensors are named FILE:TENSOR, where FILE is the file name without\n"
     "its extension (a bare .npy is just FILE); --prefix NAME replaces FILE.\n"
     "\n"
     "By default the data stays in the file and the database keeps a reference (path, offset,\n"
     "dtype, shape, content hash, size and mtime); reading a reference whose file changed or went\n"
     "away is an error.  --copy embeds the data in the database as 1 MiB chunks instead.\n"
     "Importing unchanged content again is a no-op; a changed file updates its tensors, and tensors\n"
     "that disappeared from it are removed.  Statistics are computed on import.\n"
     "\n"
     "  --copy         embed the data in the database\n"
     "  --prefix NAME  name tensors NAME:TENSOR (one file only)\n"
     "  --as DTYPE     read raw 16-bit (u2/i2/V2) or 8-bit (u1/i1/V1) .npy words as bf16, f16,\n"
     "                 f8_e4m3, f8_e5m2 or f8_e8m0\n"
     "  --keep-going   import the good files and report the bad ones (exit 1 if any failed);\n"
     "                 without it one bad file aborts the whole import and nothing is stored\n"
     "  -j, --jobs N   threads for hashing statistics (default: all cores)\n"
     "  --json         print the result as JSON\n"
     "\n"
     "A bad file gives `FILE: what is wrong (at byte N)` and leaves the database unchanged.",
     qs_cmd_import, NULL, NULL, 0},
    {"ls", "[PATTERN] [--json] [--sort name|size|absmax|kurtosis]", "list tensors",
     "Lists tensors whose name matches the glob PATTERN (default: all) with shape, dtype, size,\n"
     "absmax, kurtosis, outlier fraction and where the data lives (ref = file, blob = database).\n"
     "\n"
     "  --json         one JSON array\n"
     "  --sort KEY     name (default), size, absmax, kurtosis or outliers\n"
     "  --stale        also check every reference against its file and mark stale ones",
     qs_cmd_ls, NULL, NULL, 0},
    {"show", "TENSOR [--json]", "statistics of one tensor",
     "Prints a tensor's source, shape, dtype, size, hash and statistics: min, max, mean, std,\n"
     "absmax, exact percentiles, kurtosis (Pearson, Gaussian = 3), fraction of zeros, outlier\n"
     "fraction (|x - mean| > 6 std), NaN/Inf counts, and for 2-D (or higher) tensors a summary of\n"
     "the per-row and per-column absmax and the largest channels.\n"
     "\n"
     "  --json         one JSON object",
     qs_cmd_show, NULL, NULL, 0},
    {"rm", "TENSOR...", "remove tensors from the database",
     "Removes the named tensors and their embedded data and statistics.  Each TENSOR is the tensor\n"
     "of that exact name when there is one, else a glob (so `rm 'w[0]'` removes `w[0]`, not `w0`);\n"
     "all are resolved before anything is removed.  Referenced files are never touched.", qs_cmd_rm, NULL, NULL, 0},
    {"gen", "KIND [--n N | --shape RxC] [--seed S] [--name NAME | -o FILE.npy] [...] | model [--params tiny|1B|3B|8B] [--dtype T] -o FILE.gguf",
     "generate a synthetic tensor or a random model",
     "Generates a deterministic synthetic tensor (same seed, same bits) and either stores it in\n"
     "the database under NAME (embedded) or writes it to FILE.npy (`-o -` writes to stdout).\n"
     "\n"
     "Kinds: gaussian, laplace, student-t, uniform, lognormal, llm-act (see `qscope gen --list`).\n"
     "\n"
     "  --n N          1-D tensor of N elements (default 65536)\n"
     "  --shape RxC    2-D tensor (rows x columns; for llm-act: tokens x channels)\n"
     "  --seed S       seed (default 0)\n"
     "  --scale X      standard deviation (gaussian, laplace), half-width (uniform), multiplier\n"
     "  --nu X         degrees of freedom for student-t (default 3)\n"
     "  --sigma X      lognormal sigma (default 1)\n"
     "  --outliers K   llm-act: number of outlier channels (default cols/256, at least 1)\n"
     "  --outlier-range LO,HI  llm-act: outlier magnitude factor range (default 20,100)\n"
     "  --name NAME    store in the database as NAME (replacing a generated tensor of that name)\n"
     "  -o FILE.npy    write a .npy file instead\n"
     "  --list         list the kinds\n"
     "\n"
     "`qscope gen model -o FILE.gguf` writes a random Llama-architecture GGUF of a real model's shape,\n"
     "for tests and benchmarks of models larger than memory (`llm eval --weights mapped`): written as it\n"
     "is generated (never whole in memory; refused when the disk has not its size + 1 GiB free), the\n"
     "same bytes for the same seed, a byte-level vocabulary so that any text tokenizes.\n"
     "  --params tiny|1B|3B|8B  the shape: tiny (2 layers, dim 256, ffn 512), 1B (16 x 2048, ffn 8192,\n"
     "                 32/8 heads), 3B (28 x 3072, ffn 8192, 24/8 heads), 8B (32 x 4096, ffn 14336,\n"
     "                 32/8 heads); vocabulary 32000 (default tiny)\n"
     "  --dtype T      the matrices' type: f32, f16, bf16 (default), q8_0, q4_0, q4_1, q5_0, q5_1,\n"
     "                 q4_k, q6_k (norms f32); values ~ normal, std 0.02\n"
     "  --layers N     another number of layers   --tied  no output matrix   --seed S (default 1)\n"
     "  --arch llama   the only architecture",
     qs_cmd_gen, NULL, NULL, 0},
    {"quant", "-f FORMAT [options] [--codes] [IN -o OUT.npy | TENSOR [--name OUT]]",
     "fake-quantize numbers (stdin), a tensor file or a database tensor",
     "With no input, reads whitespace-separated numbers from stdin (decimal, hex floats such as\n"
     "0x1.8p+3, nan, inf, -inf), rounds each to float32, and prints the fake-quantized values one per\n"
     "line (%.9g; nan, inf, -inf).  Block formats group consecutive values in input order; a final\n"
     "partial block is its own block (HiF4 and llama.cpp's types pad it with zeros); NVFP4's per-tensor\n"
     "scale covers all values read.  --codes prints, per value, the code (hex) and its block's metadata\n"
     "(hex), and for NVFP4 the per-tensor scale.  With --scale tensor|row (stdin is one run) the values\n"
     "are Q(x*s)/s, the codes those of x*s, and --codes prints 1/s after each code (value =\n"
     "decode * 1/s).\n"
     "\n"
     "With IN (a .npy/.npz/.safetensors/.gguf file holding one tensor), writes OUT.npy.  With the\n"
     "name of a database tensor, stores the result as a new embedded tensor (default name\n"
     "TENSOR@FORMAT) whose metadata records the format, options, input hash and tool version.\n"
     "-f F:imatrix=FILE (a database tensor; F one of llama.cpp's types with importances, e.g. q4_k)\n"
     "rounds it with its entry of a llama.cpp importance matrix (`llm imatrix`, llama-imatrix's\n"
     ".gguf/.dat; the entry named as the tensor, or as its name after the import's FILE: prefix) as\n"
     "llama-quantize --imatrix does; the file's hash is in the options (docs/llm.md, llm imatrix).\n"
     "\n"
     QS_QUANT_OPTS_HELP
     "  --codes             print codes and scales instead of values (stdin only)\n"
     "  -o OUT.npy          output file for a file input\n"
     "  --name OUT          name of the stored result for a database tensor\n"
     "  --json              print the stored result as JSON",
     qs_cmd_quant, NULL, NULL, 0},
    {"formats", "[--json]", "list the number formats",
     "Every format of the registry with bits per element (metadata included), block size, smallest\n"
     "subnormal, smallest normal and largest finite magnitude, binades (log2 of largest over smallest),\n"
     "whether it has Inf and NaN, and its default rounding.\n"
     "\n"
     "Family ggml: llama.cpp's types q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs and\n"
     "the activation types q8_1 q8_k, quantized block for block as ggml's reference quantizers write\n"
     "them (blocks of 32 or 256 along each row; rounding 'ggml'; q8_0/q8_1 --round rne: ggml-cpu's x86\n"
     "activation quantizers; docs/formats.md).", qs_cmd_formats, NULL, NULL, 0},
    {"explain", "-f FORMAT [options] VALUE... | --table", "show how values are encoded, bit by bit",
     "For an element format: each value's code in binary with its fields (sign, exponent/dot,\n"
     "mantissa), the decoded value, the neighbouring grid values below and above, and the rounding\n"
     "error (absolute, relative, in ulps).  For a block format the values form blocks: the block's\n"
     "metadata (scale) and every element's code and error.  --table lists every code of a format of\n"
     "at most 8 element bits with its value.\n"
     "\n"
     QS_QUANT_OPTS_HELP
     "  --table             list every code", qs_cmd_explain, NULL, NULL, 0},
    {"analyze", "[TENSOR... | --all] -f F1,F2,... [format options] [--blocks] [--force] [--json | --csv]",
     "quantization error metrics of tensors under formats, stored and reused",
     "For every tensor (a name, or a glob when no tensor has that exact name; --all for every tensor)\n"
     "and every format of the list, computes MSE, RMSE, SQNR, effective bits by two definitions\n"
     "(-1/2 log2(sum e^2 / sum x^2) and (SQNR - 1.76) / 6.02), max absolute error, max and mean\n"
     "relative error, bias, cosine similarity,\n"
     "underflow, clipping and NaN/Inf fractions, the shares of the error energy sum e^2 carried by\n"
     "underflow, clipping and rounding (the table's MAIN ERROR names the largest, or the share of\n"
     "values that became NaN/Inf), and bits per element, with histograms (values,\n"
     "absolute/relative/ulp errors, scale codes, block errors), and stores them.  A stored result is\n"
     "reused when tensor content, format, options and qscope version are the same (--force\n"
     "recomputes).  Tensors are streamed with bounded memory on both cores; a progress bar shows on a\n"
     "terminal; Ctrl-C stores nothing of the unfinished result.  Under `mpirun -np N` the pairs are\n"
     "spread over the ranks by size and rank 0 stores them once all are done (README, docs/scale.md).\n"
     "\n"
     "A format entry may carry its own options: -f mxfp4:scale-rule=rceil,mxfp4:block=16,nvfp4.\n"
     "Element casts (fp8_*, fp6_*, fp4_e2m1, fp16, hif8) are cast raw by default (scale=none): values\n"
     "past the format's largest finite become NaN/Inf (E4M3 past 448, as real activations' outliers\n"
     "do; a note on stderr says so), whereas `llm`, `llm eval` and `llm sensitivity` scale per row by\n"
     "default.  -f hif8:scale=row,fp8_e4m3:scale=tensor (or --scale row|tensor|col) puts one FP32\n"
     "scale per row/tensor/column, absmax -> the format's scale target (docs/formats.md; the scales'\n"
     "32 bits count in bits per element), as `llm` and `attn` do.\n"
     "\n"
     QS_QUANT_OPTS_HELP
     "  --blocks            also store per-block scale codes, absmax, amax/scale and RMSE, and\n"
     "                      per-row/column RMSE of 2-D tensors (for the workbench and block plots)\n"
     "  --force             recompute even if a stored result exists\n"
     "  -j, --jobs N        threads (default 2)\n"
     "  --json | --csv      machine output", qs_cmd_analyze, NULL, NULL, 1},
    {"report", "[-o DIR] [--format md|html|json|csv] [--tensors GLOB] [--formats LIST] [options]",
     "write a report: which format loses least on each tensor, and why",
     "Writes DIR/report.FORMAT (default report/report.md).  It opens with the model-level evaluation\n"
     "when the database has one (each stored `llm eval` run, then the `llm sensitivity` tables with\n"
     "their plans and heatmaps).  Then, for the tensors chosen by --tensors, analyzed under every\n"
     "format of LIST (stored results are reused; missing ones are computed): per tensor the formats\n"
     "ranked by effective bits, the Pareto front of bits per element against effective bits, the main\n"
     "error source of each format (underflow, clipping or rounding: the one carrying most of the error\n"
     "energy, with the shares; or the values that became NaN/Inf), a recommendation, and the plots.\n"
     "Without --tensors the report covers the first 16 tensors by name, or none when the database\n"
     "holds a model-level evaluation; it says how many it left out.  After the tensors come, when\n"
     "the database has them, the RL runs (a row of mismatch diagnostics per run and the KL\n"
     "trajectories), the newest msd, attn and resq results, the training runs, then the paper-claims\n"
     "table of `qscope claims` (with its plots).  md links its plots as PNG files in DIR (keep the\n"
     "directory together); html is one self-contained file, every image inlined as a data: URI (the\n"
     "PNG files in DIR are copies); json and csv give the same numbers as `qscope analyze --json`,\n"
     "csv only the tensor rows.\n"
     "\n"
     "  -o DIR              output directory (default report)\n"
     "  --format F          md (default), html, json, csv\n"
     "  --tensors GLOB      the tensors whose names match GLOB (* ? [...]); '*' for all.  Default:\n"
     "                      the first 16 by name, none beside a model-level evaluation\n"
     "  --formats LIST      formats to compare, with per-format options as in analyze (default\n"
     "                      " DEFAULT_REPORT_FORMATS ")\n"
     "  --no-plots          skip the PNG files\n"
     "  --claims MODE       quick (default: the reduced sizes of `claims --quick`), full or none\n"
     "\n"
     "Format options (--round, --scale-rule, ...) apply to every format of the list.", qs_cmd_report, NULL, NULL, 1},
    {"claims", "[--quick] [--only PATTERN] [--plots DIR] [--save] [-v] [--json | --list]",
     "re-measure the source papers' reproducible headline numbers",
     "Runs one measurement per claim of the papers qscope is built on (HiFloat8, HiFloat4, OCP MX and\n"
     "NVFP4, MXAttention, Multi-Scale Dequant, AMLA, Rollout-ResQ, AIS), with fixed seeds and stated\n"
     "settings, and prints the claim, the paper, the paper's figure, the measured figure and a verdict:\n"
     "reproduced (within the stated tolerance), differs (the detail line gives the settings and the\n"
     "most likely reason), not on CPU, model (the figure of a model the project reconstructs, not a\n"
     "measurement), or inconclusive (a 95 % interval that neither meets nor misses the figure, or too\n"
     "few runs).  hif4.pretrain reads the stored default training sweep (`train --sweep default`) and\n"
     "runs it first when runs are missing (~12 min; --quick trains a reduced sweep in memory\n"
     "instead).  The RL claims on a transformer (hif4.rl-mismatch, resq.rl-gap, ais.llm-c2/c4) read\n"
     "the stored `rl grpo --sweep hif4-rl|resq|ais` runs and never train: without them they say \"not\n"
     "measured\" and name the sweep (--quick runs a tiny random policy in memory, always\n"
     "inconclusive).  Where the spec marks a recipe as the project's reconstruction,\n"
     "the detail says so.  docs/claims.md describes every measurement.\n"
     "\n"
     "  --quick        reduced sizes (same seeds), under a minute; exits 1 when a claim marked\n"
     "                 'must hold' (exact facts and bounds) does not reproduce -- `make test` runs it\n"
     "  --only PAT     only the claims whose id matches the glob PAT (e.g. 'hif8.*')\n"
     "  --plots DIR    write each claim's plot as DIR/claim-ID.png\n"
     "  --save         store the results in the database (result kind 'claim'), for `qscope report`\n"
     "  -v             print every claim's settings, not only for those that differ\n"
     "  --json         one JSON object\n"
     "  --list         list the claims", qs_cmd_claims, NULL, NULL, 1},
    {"info", "[--json]", "summary of the database",
     "Prints the database path, schema version, counts of sources, tensors, elements and bytes\n"
     "(referenced and embedded), results and RL runs, and the largest tensors.", qs_cmd_info, NULL, NULL, 0},
    {"demo", "[--force]", "fill the database with the demo set (tensors, an RL run, kernel results)",
     "Generates a varied synthetic set (Gaussian, Laplace, Student-t, uniform, log-normal weights\n"
     "and LLM-like activations with outlier channels), embeds the all-MiniLM-L6-v2 sample of\n"
     "datasets/sample, and runs a short `sim grpo` (60 steps, MXFP4 rollouts, one seed) and small\n"
     "`msd`, `attn` and `resq` measurements, so that every view of the workbench has content (a few\n"
     "seconds).  Does nothing if demo tensors already exist, unless --force.", qs_cmd_demo, NULL, NULL, 0},
    {"check", "[--deep] [--json]", "verify the database and every tensor reference",
     "Runs SQLite's integrity and foreign-key checks and checks every referenced file (present,\n"
     "same size, modification time, status-change time, inode and device) and every embedded\n"
     "tensor (all chunks present and of the right size).  --deep also re-hashes every tensor's\n"
     "bytes against its stored hash.  Exit 1 if anything is wrong.", qs_cmd_check, NULL, NULL, 0},
    {"schema", "", "print the database schema (SQL)",
     "Prints the SQL of the current schema, for use with sqlite3.", qs_cmd_schema, NULL, NULL, 0},
    {"bench", "[formats [-f LIST] | analyze | rl [--sample [--model PATH]] | kernels | train [shape] [--recipes LIST] [--steps N] | eval --model PATH [--text T] [--ctx N] [--chunks K] [--config SPEC]... [--reps R] [--weights mapped|f32|auto] [--peer PATH] | tokenize [--text FILE] [--model PATH | --tokenizer PATH] [--threads LIST] [--reps R] [--lopt-chunk B] [--lopt-overlap B] [--peer tokenizers] | quantize --model F32.gguf [--types LIST] [--peer PATH] [--imatrix FILE] [--threads N] | tui] [--score] [--quick] [--json] [--npy FILE]", "measure throughput",
     "`qscope bench` times the store's hot paths on generated data, min and median of repeated\n"
     "runs: hashing, decode of each storage dtype to float32, statistics (1 and 2 threads), and an\n"
     "end-to-end import of a .npy file (--npy FILE to use yours).\n"
     "\n"
     "`qscope bench formats` times fake-quantize and encode of every format (or the comma-separated\n"
     "-f LIST; NAME:sr in it: that format with stochastic rounding) on 16M float32 values, one and two\n"
     "threads, next to memcpy in the same run, and checks that two threads give the same bits as one\n"
     "and that decode(encode) equals fake-quantize.\n"
     "\n"
     "`qscope bench analyze` times the analysis (metrics and histograms) of a 64M-element tensor\n"
     "under 10 formats against fake-quantization alone, in the same run.\n"
     "\n"
     "`qscope bench rl` times the RL log path on a generated 4M-token log: parse only, import-log of\n"
     "CSV and JSONL into a fresh database, and ais over the stored run (tokens/s).\n"
     "`qscope bench rl --sample` times the batched sampler of GRPO rollouts: 64 sequences (8 prompts\n"
     "x 8 samples) decoding together on the SmolLM2 model of `make data` (or --model PATH) and a small\n"
     "synthetic model, fp32 and rollout configs (mxfp4, ResQ, hif4, kv=fp8): tokens/s and GEMM\n"
     "FLOP/s against OpenBLAS SGEMM over the same matrices in the same run, and against the run's square\n"
     "2048^3 SGEMM; CPU seconds, load average and the ratio per CPU second (--quick: 16 new tokens).\n"
     "\n"
     "`qscope bench kernels` times OpenBLAS SGEMM and, in the same run, FlashAttention-2 (L=4096,\n"
     "d=128), AMLA and the MSD two-pass INT8 GEMM, one thread then two, against the issue targets.\n"
     "`qscope bench --score` prints a CANN-Bench-style scorecard: per-dtype precision gates against\n"
     "FP64 and the hardware-anchored score against a plain C baseline and this machine's roofline.\n"
     "\n"
     "`qscope bench train` times training steps per recipe (--recipes LIST, default fp32, bf16, mxfp8,\n"
     "mxfp4, nvfp4, hif4; --steps N, default 10) of a model of --layers --dim --heads --kv-heads --ffn\n"
     "--ctx --batch (default 4, 256, 4, = heads, 4*dim, 128, 8; byte vocabulary) against OpenBLAS SGEMM\n"
     "in the same run: step ms, tokens/s, 6 x parameters x tokens FLOP/s, fraction of SGEMM, ratio to\n"
     "fp32 and a per-part breakdown (docs/train.md, \"Speed\"), then each recipe's step over fp32's on\n"
     "one line, by median wall time and by CPU time (issue 26's FP4 target: <= 1.3x).\n"
     "\n"
     "`qscope bench eval --model PATH` times `llm eval`'s computation on --text (default\n"
     "data/text/persuasion.txt), --ctx 512, --chunks 4: the reference and each --config (default w=mxfp4,\n"
     "a=mxfp4, kv=fp8_e4m3, a=int8:gran=block:block=32,kv=fp16) side by side, best and median of --reps 3,\n"
     "tokens/s, GFLOP/s (2 x matrix parameters per token), % of OpenBLAS SGEMM timed on the model's own\n"
     "products in the same run, and each configuration's time over the reference's.  --peer PATH (or\n"
     "QS_LLAMA_PERPLEXITY) runs llama.cpp's llama-perplexity on the same GGUF, text, context, chunks and\n"
     "threads and prints the ratio (docs/llm.md, \"Speed\").  --weights mapped (as `llm eval`'s; default f32)\n"
     "evaluates with the weights left in the file, SGEMM timed matrix by matrix on widened copies, and\n"
     "prints the evaluation's peak resident set (docs/llm.md, \"Models larger than memory\").\n"
     "\n"
     "`qscope bench quantize --model F32.gguf` quantizes every F32 matrix whose rows are whole blocks to\n"
     "each of llama.cpp's types (--types LIST, default q4_0..iq4_xs) with qscope (in memory, --threads N,\n"
     "default every core; --imatrix FILE: with importances) and, with --peer PATH (or QS_LLAMA_QUANTIZE),\n"
     "with llama.cpp's llama-quantize --pure in the same run: seconds and MB/s of F32 input side by side\n"
     "(the peer's own \"quantize time\", file reading and writing included) and the count of blocks of\n"
     "llama-quantize's output that differ from qscope's (docs/llm.md, \"llm imatrix\").\n"
     "\n"
     "`qscope bench tokenize` times the sequential tokenizer and LoPT (docs/tokenize.md) at each thread\n"
     "count of --threads LIST (e.g. 1,2,4 or 1-8; default 1..cores) on --text FILE (default: Austen's six\n"
     "novels of `make data`, concatenated) with the tokenizer of --model PATH (default the SmolLM2 GGUF)\n"
     "or --tokenizer tokenizer.json: MB/s, tokens/s, speed-up over sequential, best and median of --reps 5\n"
     "(--quick: 2) interleaved runs, CPU seconds over the sequential run's, LoPT's chunks/anchors/regrown/\n"
     "fall-backs and an Amdahl model of 1-16 threads; --lopt-chunk, --lopt-overlap set its bytes per\n"
     "chunk and overlap (default LoPT's: 65536 and 64 bytes).  Every LoPT output must\n"
     "equal the sequential ids (exit 1 otherwise).  --peer tokenizers runs Hugging Face `tokenizers` on\n"
     "the same text and tokenizer (tests/bench/tokenizers_peer.py; encode with RAYON_NUM_THREADS=1,\n"
     "encode_batch of paragraphs at 1 and at its default threads) and checks it gives the same ids\n"
     "(docs/scale.md, BENCHMARKS.md).\n"
     "\n"
     "`qscope bench tui` times the workbench on a generated 10,000-tensor database (--tensors N):\n"
     "first frame (open, load, draw) and redraw after a key in every view, headless.\n"
     "--quick uses 1M values (smaller shapes for kernels).", qs_cmd_bench, NULL, NULL, 0},
    {"plot", "KIND [TENSOR|RUN...] -o FILE.png|- [-f F1,F2] [--width W --height H --dpi D --title T --logx --logy]",
     "draw a result as a PNG (with provenance) or in the terminal",
     "Kinds:\n"
     "  err-hist TENSOR       histogram of the relative error |Q(x)-x|/|x| of each format (-f, default\n"
     "                        fp8_e4m3,mxfp4,nvfp4), overlaid, log counts; --abs for |Q(x)-x|\n"
     "  value-hist TENSOR     histogram of |x| on a log2 axis; with -f F, F's representable values\n"
     "                        (block formats: of a block with absmax --amax X, default the\n"
     "                        tensor's absmax) and the histogram of Q(x)\n"
     "  pareto TENSOR         effective bits vs bits per element of each format (default: all) and\n"
     "                        the Pareto front\n"
     "  block-heatmap TENSOR  per-block RMSE of a 2-D tensor under -f F (log colour scale)\n"
     "  transfer              x -> Q(x) and Q(x) - x of -f F over --range LO,HI (block formats: in a\n"
     "                        block whose absmax is --amax X, default 1)\n"
     "  sensitivity           the latest `llm sensitivity` table: mean KL per layer x site (log colours)\n"
     "  kl                    per-token KL to the FP32 reference of a stored `llm eval` (newest run;\n"
     "                        --model NAME|HASH, --ctx N, --config LABEL (repeatable; default all),\n"
     "                        --cdf for the cumulative fraction instead of the log-x histogram)\n"
     "  loss [RUN_GLOB...]    validation loss of stored training runs against the step (--train: the\n"
     "                        training loss); runs of one recipe, model and options apart from the seed\n"
     "                        as one mean curve with a dotted band (min..max of 2 seeds, the 95%\n"
     "                        t-interval of the mean with 3 or more); --baseline RECIPE_OR_RUN adds a\n"
     "                        panel of (loss - baseline) / baseline in % per step (docs/train.md)\n"
     "  trajectory, msd, attn results of later analyses (an error until the database has them)\n"
     "\n"
     "Stored results of `qscope analyze` are used when present for the same tensor hash, format and\n"
     "options; otherwise the data is computed on the fly (--fresh always recomputes).\n"
     "\n"
     "  -o FILE.png     write a PNG (text chunks: Software, qscope:command, qscope:database,\n"
     "                  qscope:tensor-hashes, qscope:formats, qscope:options; pHYs = --dpi)\n"
     "  -o -            draw in the terminal (braille; --term braille|block|ascii|auto)\n"
     "  -f LIST         formats, comma-separated, each with optional :key=value options\n"
     "                  (e.g. mxfp4:scale-rule=rceil); -f may be repeated\n"
     "  --width W --height H  pixels (default 10 x 6 inches at the dpi); cells for -o -\n"
     "  --dpi D         resolution (default 100); fonts and lines scale with it\n"
     "  --title T       replace the title\n"
     "  --logx, --logy  log10 axis; --xscale/--yscale lin|log2|log10|symlog for any scale\n"
     "  --range LO,HI   transfer: input range;  --samples N  transfer: number of samples\n"
     "  --amax X        transfer, value-hist: absmax of the block (block formats)\n"
     "  --abs           err-hist: absolute instead of relative error\n"
     "  --baseline B    loss: the gap to run B, or to the runs of recipe B (of the first run's model)\n"
     "  --val, --train  loss: the validation loss (default) or the training loss\n"
     "  --fresh         ignore stored results\n"
     "Format options (--round, --scale-rule, --block, --axis, --gran, ...) apply to every format.\n"
     "Colour in the terminal only on a terminal with NO_COLOR unset; series differ by glyph too.",
     qs_cmd_plot, NULL, NULL, 0},
    {"import-log", "FILE... [--run NAME] [--label TEXT] [--replace] [--json]",
     "import RL per-token log-probs (mmlog v1 CSV or JSONL) as a run",
     QS_IMPORT_LOG_HELP, qs_cmd_import_log, NULL, NULL, 0},
    {"runs", "[PATTERN] [--json] | --rm RUN... | --export RUN [-o FILE.csv]", "list, remove or export stored RL and training runs",
     "Lists the RL runs (imported logs, simulations, scored models) with token and step counts, then,\n"
     "under \"training runs\", the runs of `qscope train` (recipe, seed, status running/done/stopped/\n"
     "failed, steps done/planned, validation loss before the first step -> after the last measured).\n"
     "PATTERN (a glob) filters both.\n"
     "  --json         one JSON object: {\"rl_runs\": [...], \"train_runs\": [...]}, each run with its\n"
     "                 metadata (a training run with its model and options)\n"
     "  --rm RUN...    delete runs (RL runs with their tokens, training runs with their steps), all or none\n"
     "  --export RUN   an RL run as an mmlog v1 CSV (exact values; original ids where known), which\n"
     "                 import-log reads back to the same tokens; a training run as its steps' CSV\n"
     "                 (step,train_loss,val_loss,grad_norm,lr,tok_s, as train --csv); to stdout or -o FILE",
     qs_cmd_runs, NULL, NULL, 0},
    {"ais", "RUN [--method M] [--json | --csv | --weights] [AIS-R and correction options]",
     "mismatch diagnostics, AIS-R mixing coefficient and IS corrections of an RL run, per step",
     QS_AIS_HELP, qs_cmd_ais, NULL, NULL, 0},
    {"sim", "[--formats LIST] [--methods LIST] [--seeds N] [options]",
     "CPU GRPO simulation with quantized rollouts, comparing IS corrections over seeds",
     QS_SIM_HELP, NULL, qs_sim_subcommands, NULL, 0},
    {"rl", "[--model PATH] [--task T] [--rollout SPEC] [--trainer RECIPE] [--correction M] [options]",
     "GRPO on a real transformer with quantized rollouts and a trainer in any recipe",
     QS_RL_HELP, NULL, qs_rl_subcommands, NULL, 0},
    {"msd", "[--M M --K K --N N] [--dist D] [--outliers C] [--mx-rule R] [--model P,..] [--tensor T] [--json]",
     "Multi-Scale Dequant: effective bits, GEMM errors, the M/64516 bound, latency model",
     "Decomposes BF16 activations into k INT8 components (per-token absmax, round half away,\n"
     "a1 = R(127x/M), a2 = R(254(t - a1)), ...) and multiplies them with per-channel INT8 weights\n"
     "in ONE exact integer GEMM (SGEMM on K-chunks whose partial sums provably stay below 2^24;\n"
     "checked against an int32 loop).\n"
     "Prints: effective bits of INT8 (1-3 passes), of the MX two-pass decomposition and of\n"
     "single-pass MXFP8 on Gaussian and uniform data (both definitions); GEMM errors of dequant-to-\n"
     "FP32/BF16, W8A8, MSD 2/3-pass against FP64 of the quantized model and of the unquantized\n"
     "weights; the element-wise bound M/64516 on the random rows and on adversarial tie rows; the\n"
     "latency / HBM model and KV byte ledger.  Stored as result kind msd (`qscope plot msd`).\n"
     "RECONSTRUCTED (not the paper's text): the MXFP4 recipe and the latency/traffic model.\n"
     "\n"
     "  --M, --K, --N N      GEMM shape (default 16 x 4096 x 4096)\n"
     "  --dist D             activations: gaussian (default), uniform, laplace, student-t, llm-act\n"
     "  --seed S             seed (weights use S+1)\n"
     "  --outliers C         multiply C input channels by --outlier-mag X (default 20)\n"
     "  --bits-samples N     values per distribution for effective bits (default 2^20, max 2^24)\n"
     "  --mx-format F        MX format of the two-pass decomposition (default mxfp4)\n"
     "  --mx-rule R          pass-1 block scale rule (default rceil = the spec's no-clip rule)\n"
     "  --mx-res-rule R      residual-pass scale rule (default rceil)\n"
     "  --mx-fixed-shift S   residual pass uses the fixed scale X1/2^S instead (own = default)\n"
     "  --mx-w-rule R        MX weight scale rule (default floor)\n"
     "  --model P,..         latency profiles: ascend910, h100 (illustrative), cpu (measured), none,\n"
     "                       custom:pbf16=X:plow=X:rvec=X:bw=X (FLOP/s, OP/s, elements/s, bytes/s)\n"
     "  --passes K           passes in the model (default 2)\n"
     "  --tensor T           activations from a stored 2-D tensor (rows = tokens)\n"
     "  --no-store           do not store the result\n"
     "  --json               print the result JSON", qs_cmd_msd, NULL, NULL, 0},
    {"attn", "[--L L,..] [--H H --Hkv H --d D --dv D] [--mla] [--causal] [--kv F] [--json]",
     "attention kernels: FP64 reference, FA2, split-KV, AMLA, MXFP4 UOS/PNQ, KV formats, MSD decode",
     "For each sequence length: FP64 reference; FlashAttention-2 (SGEMM tiles, online softmax) in\n"
     "FP32, with split-KV combine and with P in BF16; AMLA (power-of-two rescale by an integer add\n"
     "on the FP32 bits, with and without the 1.5 eps compensation); MXFP4 attention with FLOOR or\n"
     "UOS scales and normalize-then-quantize or PNQ; FA2 on a KV cache in any registry format\n"
     "(--kv); the MSD decode path with INT8 K/V (and INT4 K/V, 4 passes of 7.49/14.98) against\n"
     "dequant-to-BF16.  Errors (relative L2, max |diff|, cosine) against the FP64 reference of the\n"
     "same quantized inputs and of the unquantized ones.  Stored as result kind attn\n"
     "(`qscope plot attn`).\n"
     "UOS/PNQ follow the spec's reconstruction of MXAttention (formats-mx.md 5).\n"
     "\n"
     "  --L L1,L2,..         key lengths (default 256,512,1024,2048)\n"
     "  --Lq N               query rows (default = L; decode: 1)\n"
     "  --H, --Hkv N         query / KV heads (default 4 / H)\n"
     "  --d, --dv N          head dims (default 128 / d)\n"
     "  --mla                MLA decode: H 16, Hkv 1, d 576, dv 512, V = K[:, :dv], Lq 1 (each\n"
     "                       overridable by its own option)\n"
     "  --causal             causal mask\n"
     "  --br, --bc N         FA2 tile sizes (default 128 / 256)\n"
     "  --splits N           split-KV ranges of the split run (default 4)\n"
     "  --threads N          threads (default 2)\n"
     "  --qscale X           multiply Q (sharper softmax; default 1)\n"
     "  --kv F[:opt=v..]     KV cache format (registry name, e.g. fp8_e4m3, mxfp4:scale-rule=rceil,\n"
     "                       hif8) with the per-format options of `quant`; stored in the options\n"
     "  --uos-qmax X         UOS threshold (default 7.25)\n"
     "  --msd-passes K       MSD decode passes (2 default, 3, 0 = skip)\n"
     "  --dist D --seed S    inputs (default gaussian, 0)\n"
     "  --q T --k T --v T    stored tensors instead: Q (H*Lq) x d, K (Hkv*L) x d, V (Hkv*L) x dv\n"
     "                       (leading dims flattened; --v not needed with --mla); keyed by their hashes\n"
     "  --no-store --json", qs_cmd_attn, NULL, NULL, 0},
    {"resq", "[--m M --d D --n N] [-f hif4,mxfp4,nvfp4] [--outliers C] [--json]",
     "Rollout-ResQ: FP4 layer plus a sparse quantized-residual correction",
     "Y = Q(X)Q(W)^T + S(Q(X - Q(X)))Q(W)^T for each format with S = none, dense, 2:4, ch50 (half\n"
     "the channels by residual L2 norm), blk50 (half the 32x64 blocks); error against the FP32 layer\n"
     "on LLM-like activations with outlier channels, the fraction of non-zero activations that\n"
     "underflow to 0 and the fraction of those the correction recovers.  Stored as kind resq.\n"
     "Reconstructed from secondary summaries (formats-hifloat.md 4).\n"
     "\n"
     "  --m, --d, --n N      tokens, input and output channels (default 256, 2048, 1024)\n"
     "  -f LIST              formats (default hif4,mxfp4,nvfp4)\n"
     "  --outliers C         outlier channels (default d/256); --outlier-range LO,HI (20,100)\n"
     "  --block RxC          blk50 block (default 32x64)\n"
     "  --tensor T           activations from a stored tensor (rows = tokens; keyed by its hash)\n"
     "  --seed S --no-store --json", qs_cmd_resq, NULL, NULL, 0},
    {"llm", "[--model PATH] [options]",
     "run a real causal LM (SmolLM2 GGUF): mismatch runs, activations, throughput",
     "A Llama, Qwen2, Gemma 2 or Gemma 3 model (SmolLM2-135M-Instruct and Gemma-3 270M GGUF from\n"
     "`make data`, or your own GGUF / Hugging Face directory; also Llama 3, Mistral, Mixtral, Qwen3,\n"
     "Qwen2-MoE, Qwen3-MoE) through qscope's own FP32 forward pass (dequantized weights, OpenBLAS\n"
     "matmuls); the rollout numerics are simulated by fake-quantization (experts' weights too; routing in\n"
     "FP32).  Gemma, Qwen3 and MoE run everywhere but in batched GRPO rollouts and training (refused).\n"
     "See docs/llm.md.", NULL, qs_llm_subcommands, NULL, 0},
    {"train", "[--text FILE...] [--val-text FILE] [--tokenizer MODEL | --init MODEL] [shape] [options] [--out DIR] [--name NAME | --no-store] | --resume DIR",
     "train a small Llama-architecture model (FP32 or a low-precision recipe; AdamW) and write a checkpoint",
     "Trains from scratch (llm.c-style init) or from --init MODEL on byte-level tokens or the tokens of\n"
     "--tokenizer MODEL, with AdamW (decay on matrices only), linear warm-up then cosine learning rate,\n"
     "global gradient-norm clipping and gradient accumulation; FP32 unless --recipe/--op put the linear\n"
     "layers' GEMM operands through low-precision formats (validation stays FP32).  Same options and\n"
     "--seed: bit-identical losses.  Every run is stored in the database (see `qscope runs`): its model,\n"
     "options and data hash once the input is checked (bad input stores nothing), then each step as it\n"
     "completes.  Ctrl-C (or SIGTERM) stops after the step in progress: status stopped, the --out\n"
     "checkpoint of that step, exit 130 (143); a killed run stays 'running' with its completed steps.\n"
     "Bad input (sizes that do not divide, a text shorter than ctx+1 tokens, an unknown format or\n"
     "operand) exits 2 and writes nothing.  --out checkpoints hold the optimizer state and are written\n"
     "atomically, so a killed run leaves the last one whole and --resume goes on from it bit for bit.\n"
     "Under `mpirun -np N` the run is data-parallel: each step's batch x accum windows (a multiple of N)\n"
     "are split over the ranks, gradients summed in rank order (reruns bit-identical; -np 1 is the\n"
     "serial run bit for bit, -np 2 equals it up to summation order), rank 0 prints, stores and writes;\n"
     "a rank that dies or stalls (--rank-timeout) ends the run with one line (docs/scale.md).\n"
     "See docs/train.md.\n"
     "\n"
     "  --text FILE...      training text (default: make data's data/text/*.txt except persuasion.txt)\n"
     "  --val-text FILE     held-out text for the validation loss (default data/text/persuasion.txt)\n"
     "  --tokenizer MODEL   tokenize with this model's vocabulary (GGUF or HF directory); default: bytes\n"
     "                      (vocab 256, token = byte), or --init's vocabulary\n"
     "  --init MODEL        continue from a model (GGUF or HF directory; its shape is kept)\n"
     "  --layers N --dim D --heads H --kv-heads K --ffn F   shape of a new model (default 4, 128, 4,\n"
     "                      = heads, 4*dim; head_dim = dim/heads; tied embeddings): the default small\n"
     "                      model, whose loss falls 5.57 -> 1.91 in the default 300 steps (docs/train.md)\n"
     "  --ctx T             sequence length (default 128; a new model's context)\n"
     "  --batch B           sequences per micro-batch (default 8);  --accum N  micro-batches per step (1)\n"
     "  --steps N           optimizer steps (default 300; 0: none, the model is only evaluated)\n"
     "  --lr X              peak learning rate (default 3e-3);  --warmup N  warm-up steps (default 20)\n"
     "  --min-lr F          final learning rate as a fraction of --lr (default 0.1)\n"
     "  --wd X              AdamW weight decay (default 0.1);  --clip X  gradient-norm clip (default 1, 0 = off)\n"
     "  --eval-every N      validation loss every N steps (default 50; 0 = first and last only)\n"
     "  --val-seqs K        validation windows of ctx+1 tokens, evenly spaced (default 16)\n"
     "  --seed S            init and batch seed (default 0)\n"
     "  --recipe NAME       low-precision training recipe: fp32, bf16, fp8-hybrid, mxfp8, mxfp4, nvfp4,\n"
     "                      nvfp4-1d, hif4, hif8 (docs/train.md, \"Recipes\"); validation stays FP32\n"
     "  --op OPERAND=FMT    (repeatable) one GEMM operand's format on top of --recipe (default fp32);\n"
     "                      OPERAND fwd.x fwd.w dgrad.dy dgrad.w wgrad.dy wgrad.x, FMT as in analyze -f,\n"
     "                      e.g. fwd.x=mxfp4, dgrad.dy=hif8:scale=tensor; :round=sr rounds stochastically;\n"
     "                      FMT none turns the slot off (FP32)\n"
     "  --recipe-file FILE  the recipe as JSON: {\"base\": PRESET, \"fwd.x\": FMT, ...} (any of the six\n"
     "                      operands; as --recipe/--op, which may add to it), or a per-layer plan of\n"
     "                      `llm sensitivity --formats ... --bits B --plan-out FILE`: per layer and linear\n"
     "                      fwd.w = the layer's w, fwd.x = the site feeding it; backward slots from\n"
     "                      --recipe BASE (default fp32) and --op; kv unused (docs/train.md, \"Plans\")\n"
     "  --out DIR           write a Hugging Face checkpoint (config.json, model.safetensors, tokenizer.json)\n"
     "                      plus optimizer.safetensors (AdamW moments) and trainer_state.json, atomically\n"
     "                      (a kill leaves the last whole checkpoint); DIR new, empty or a checkpoint\n"
     "  --checkpoint-every N  with --out: a checkpoint after every N-th step too (default: the last only)\n"
     "  --resume DIR        continue the run of checkpoint DIR bit for bit (model, moments, step, data order,\n"
     "                      schedule, SR counter; options from its trainer_state.json, writing to DIR); only\n"
     "                      --steps (a new end), --eval-every, --checkpoint-every, --out and --json may change;\n"
     "                      the stored run of the checkpoint goes on (steps stored after the checkpoint are\n"
     "                      recomputed); a database without it gets a new run, said in one line\n"
     "  --grad-out G.safetensors  the gradient of the mean loss of the first micro-batch (the windows step\n"
     "                      1 trains on first) at the initial weights, under the recipe, F32 with Hugging\n"
     "                      Face names (cross-check against finite differences; --steps 0: no training)\n"
     "  --batch-out B.npy   that micro-batch's token ids, int32, batch x (ctx+1)\n"
     "  --operand-out DIR   (with a recipe) layer 0's q_proj GEMM operands of that pass: OP.src.npy (FP32)\n"
     "                      and OP.q.npy (quantized), to compare with `qscope quant` (docs/train.md)\n"
     "  --json              the run as JSON, with a `steps` list of per-step records\n"
     "  --csv               the per-step records as CSV (step,train_loss,val_loss,grad_norm,lr,tok_s;\n"
     "                      val_loss empty where not measured) instead of the text\n"
     "  --name NAME         the stored run's name (default train/RECIPE/sSEED, then -2, -3 ... when taken)\n"
     "  --db FILE           the database (as the global --db)\n"
     "  --no-store          store nothing\n"
     "  --sweep SPEC        one run per recipe and seed, one after another, with the other options:\n"
     "                      'default' (recipes bf16,hif4,mxfp4,nvfp4,mxfp8 x seeds 1,2,3) or\n"
     "                      recipes=A,B,...,seeds=1,2,...; runs are named SWEEP-RECIPE-sSEED, SWEEP\n"
     "                      'default' for the default configuration, else sweep-HASH of it; one line\n"
     "                      per run (--json: the sweep's runs); stored runs already done are not run\n"
     "                      again; the claim hif4.pretrain reads the sweep 'default'.  Under mpirun the\n"
     "                      runs go to the ranks whole (rank i mod N), rank 0 stores them in order\n"
     "                      once all are done", qs_cmd_train, NULL, NULL, 1},
    {"tui", "[--formats LIST] [--no-mouse] [--ascii]", "open the workbench (also: qscope with no command, on a terminal)",
     "The interactive workbench: tensors, formats compared, error histograms, block-error heatmaps and\n"
     "the block inspector (every element's code bit by bit, in two formats side by side), RL runs and\n"
     "kernel results.  Missing results are computed in a background thread (Esc cancels); `:` runs any\n"
     "qscope command; `e` exports the plot on screen to PNG ($QSCOPE_EXPORT_DIR or the current\n"
     "directory); `?` lists every key.  See docs/workbench.md.\n"
     "\n"
     "  --formats LIST  the formats to compare, as in analyze (default: the report's list)\n"
     "  --no-mouse      leave the mouse to the terminal (selecting text)\n"
     "  --ascii         ASCII glyphs only (also on TERM=vt* or a non-UTF-8 locale)", qs_cmd_tui, NULL, NULL, 0},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0},
};

const qs_command *qs_command_find(const char *name)
{
    for (const qs_command *c = qs_commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

const qs_subcommand *qs_subcommand_named(const qs_command *c, const char *name)
{
    for (const qs_subcommand *s = c->subs; s && s->name; s++)
        if (strcmp(s->name, name) == 0) return s;
    return NULL;
}

const qs_subcommand *qs_subcommand_find(const qs_command *c, int argc, char **argv)
{
    return argc < 2 ? NULL : qs_subcommand_named(c, argv[1]);
}

/* "score, capture, ..." or "score|capture|..." */
static const char *sub_names(const qs_command *c, const char *sep)
{
    static char buf[512];
    size_t o = 0;
    buf[0] = 0;
    for (const qs_subcommand *s = c->subs; s->name && o < sizeof buf; s++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", s == c->subs ? "" : sep, s->name);
    return buf;
}

int qs_command_run(qs_cli *cli, const qs_command *c, int argc, char **argv)
{
    if (!c->subs) return c->run(cli, argc, argv);
    const qs_subcommand *s = qs_subcommand_find(c, argc, argv);
    if (s) return s->run(cli, argc - 1, argv + 1);
    if (argc < 2) return qs_cli_usage(c->name, "choose a subcommand: %s", sub_names(c, ", "));
    return qs_cli_usage(c->name, "unknown subcommand '%s' (%s)", argv[1], sub_names(c, ", "));
}

void qs_command_help(FILE *f, const qs_command *c)
{
    if (!c->subs) {
        fprintf(f, "usage: qscope [--db PATH] %s %s\n\n%s\n\n%s\n", c->name, c->args, c->summary, c->help);
        return;
    }
    fprintf(f, "usage: qscope [--db PATH] %s %s %s\n\n%s\n\n%s\n\n", c->name, sub_names(c, "|"), c->args, c->summary,
            c->help);
    for (const qs_subcommand *s = c->subs; s->name; s++) fprintf(f, "  %-8s  %s", s->name, s->help);
    if (c->options) fprintf(f, "\n%s\n", c->options);
    fprintf(f, "\nsubcommands: %s (`qscope help %s SUB`: a subcommand's own usage and options)\n", sub_names(c, ", "), c->name);
}

void qs_subcommand_help(FILE *f, const qs_command *c, const qs_subcommand *s)
{
    fprintf(f, "usage: qscope [--db PATH] %s %s %s\n\n", c->name, s->name, s->args ? s->args : "[options]");
    /* the paragraph of `qscope help CMD`, its continuation indent (12 columns) taken off */
    for (const char *p = s->help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && strncmp(p + 1, "            ", 12) == 0) p += 12;
    }
    if (s->options && *s->options) fprintf(f, "\n%s\n", s->options);
    else fprintf(f, "\n(no options)\n");
}

int qs_command_sharded(const qs_command *c, int argc, char **argv)
{
    if (!c->subs) return c->sharded;
    const qs_subcommand *s = qs_subcommand_find(c, argc, argv);
    return s && s->sharded;
}
