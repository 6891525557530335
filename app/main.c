/*
** qscope entry point: global options, the command table and help.
**
** One table (qs_commands) drives dispatch, `qscope --help` and `qscope help COMMAND`, so the
** help can never drift from what exists.
*/
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_rl.h"
#include "kernel_cli.h"
#include "par.h"
#include "quant_opts.h"
#define DEFAULT_REPORT_FORMATS QS_DEFAULT_FORMATS_1 "\n                      " QS_DEFAULT_FORMATS_2
#include "../kernels/qs_version.h"

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
     qs_cmd_import},
    {"ls", "[PATTERN] [--json] [--sort name|size|absmax|kurtosis]", "list tensors",
     "Lists tensors whose name matches the glob PATTERN (default: all) with shape, dtype, size,\n"
     "absmax, kurtosis, outlier fraction and where the data lives (ref = file, blob = database).\n"
     "\n"
     "  --json         one JSON array\n"
     "  --sort KEY     name (default), size, absmax, kurtosis or outliers\n"
     "  --stale        also check every reference against its file and mark stale ones",
     qs_cmd_ls},
    {"show", "TENSOR [--json]", "statistics of one tensor",
     "Prints a tensor's source, shape, dtype, size, hash and statistics: min, max, mean, std,\n"
     "absmax, exact percentiles, kurtosis (Pearson, Gaussian = 3), fraction of zeros, outlier\n"
     "fraction (|x - mean| > 6 std), NaN/Inf counts, and for 2-D (or higher) tensors a summary of\n"
     "the per-row and per-column absmax and the largest channels.\n"
     "\n"
     "  --json         one JSON object",
     qs_cmd_show},
    {"rm", "TENSOR...", "remove tensors from the database",
     "Removes the named tensors (glob patterns allowed) and their embedded data and statistics.\n"
     "Referenced files are never touched.", qs_cmd_rm},
    {"gen", "KIND [--n N | --shape RxC] [--seed S] [--name NAME | -o FILE.npy] [...]",
     "generate a synthetic tensor",
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
     "  --list         list the kinds",
     qs_cmd_gen},
    {"quant", "-f FORMAT [options] [--codes] [IN -o OUT.npy | TENSOR [--name OUT]]",
     "fake-quantize numbers (stdin), a tensor file or a database tensor",
     "With no input, reads whitespace-separated numbers from stdin (decimal, hex floats such as\n"
     "0x1.8p+3, nan, inf, -inf), rounds each to float32, and prints the fake-quantized values one per\n"
     "line (%.9g; nan, inf, -inf).  Block formats group consecutive values in input order; a final\n"
     "partial block is its own block (HiF4 pads it with zeros); NVFP4's per-tensor scale covers all\n"
     "values read.  --codes prints, per value, the code (hex) and its block's metadata (hex), and for\n"
     "NVFP4 the per-tensor scale.  With --scale tensor|row (stdin is one run) the values are\n"
     "Q(x*s)/s, the codes those of x*s, and --codes prints 1/s after each code (value = decode * 1/s).\n"
     "\n"
     "With IN (a .npy/.npz/.safetensors/.gguf file holding one tensor), writes OUT.npy.  With the\n"
     "name of a database tensor, stores the result as a new embedded tensor (default name\n"
     "TENSOR@FORMAT) whose metadata records the format, options, input hash and tool version.\n"
     "\n"
     QS_QUANT_OPTS_HELP
     "  --codes             print codes and scales instead of values (stdin only)\n"
     "  -o OUT.npy          output file for a file input\n"
     "  --name OUT          name of the stored result for a database tensor\n"
     "  --json              print the stored result as JSON",
     qs_cmd_quant},
    {"formats", "[--json]", "list the number formats",
     "Every format of the registry with bits per element (metadata included), block size, smallest\n"
     "subnormal, smallest normal and largest finite magnitude, binades (log2 of largest over smallest),\n"
     "whether it has Inf and NaN, and its default rounding.", qs_cmd_formats},
    {"explain", "-f FORMAT [options] VALUE... | --table", "show how values are encoded, bit by bit",
     "For an element format: each value's code in binary with its fields (sign, exponent/dot,\n"
     "mantissa), the decoded value, the neighbouring grid values below and above, and the rounding\n"
     "error (absolute, relative, in ulps).  For a block format the values form blocks: the block's\n"
     "metadata (scale) and every element's code and error.  --table lists every code of a format of\n"
     "at most 8 element bits with its value.\n"
     "\n"
     QS_QUANT_OPTS_HELP
     "  --table             list every code", qs_cmd_explain},
    {"analyze", "[TENSOR... | --all] -f F1,F2,... [format options] [--blocks] [--force] [--json | --csv]",
     "quantization error metrics of tensors under formats, stored and reused",
     "For every tensor (names or globs; --all for every tensor) and every format of the list, computes\n"
     "MSE, RMSE, SQNR, effective bits by two definitions (-1/2 log2(sum e^2 / sum x^2) and\n"
     "(SQNR - 1.76) / 6.02), max absolute error, max and mean relative error, bias, cosine similarity,\n"
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
     "Element casts take the scaling default of `llm` and `attn`: -f hif8:scale=row,fp8_e4m3:scale=tensor\n"
     "(one FP32 scale per row/tensor/column, absmax -> the format's scale target, docs/formats.md;\n"
     "the scales' 32 bits count in bits per element); default none, the raw cast.\n"
     "\n"
     QS_QUANT_OPTS_HELP
     "  --blocks            also store per-block scale codes, absmax, amax/scale and RMSE, and\n"
     "                      per-row/column RMSE of 2-D tensors (for the workbench and block plots)\n"
     "  --force             recompute even if a stored result exists\n"
     "  -j, --jobs N        threads (default 2)\n"
     "  --json | --csv      machine output", qs_cmd_analyze},
    {"report", "[-o DIR] [--format md|html|json|csv] [--tensors PATTERN] [--formats LIST] [options]",
     "write a report: which format loses least on each tensor, and why",
     "For every tensor matching PATTERN (default all), analyzes it under every format of LIST (stored\n"
     "results are reused; missing ones are computed) and writes DIR/report.FORMAT (default report/\n"
     "report.md): per tensor the formats ranked by effective bits, the Pareto front of bits per element\n"
     "against effective bits, the main error source of each format (underflow, clipping or rounding:\n"
     "the one carrying most of the error energy, with the shares; or the values that became NaN/Inf),\n"
     "a recommendation, and the plots as PNG files in DIR.  --format html writes one\n"
     "self-contained file with the images embedded; json and csv give the same numbers as\n"
     "`qscope analyze --json`.  After the tensors come, when the database has them, the RL runs (a\n"
     "row of mismatch diagnostics per run and the KL trajectories) and the newest msd, attn and resq\n"
     "results (tables and plots), then the paper-claims table of `qscope claims` (with its plots); csv\n"
     "holds only the tensor rows.\n"
     "\n"
     "  -o DIR              output directory (default report)\n"
     "  --format F          md (default), html, json, csv\n"
     "  --tensors PATTERN   glob of tensor names (default *)\n"
     "  --formats LIST      formats to compare, with per-format options as in analyze (default\n"
     "                      " DEFAULT_REPORT_FORMATS ")\n"
     "  --no-plots          skip the PNG files\n"
     "  --claims MODE       quick (default: the reduced sizes of `claims --quick`), full or none\n"
     "\n"
     "Format options (--round, --scale-rule, ...) apply to every format of the list.", qs_cmd_report},
    {"claims", "[--quick] [--only PATTERN] [--plots DIR] [--save] [-v] [--json | --list]",
     "re-measure the source papers' reproducible headline numbers",
     "Runs one measurement per claim of the papers qscope is built on (HiFloat8, HiFloat4, OCP MX and\n"
     "NVFP4, MXAttention, Multi-Scale Dequant, AMLA, Rollout-ResQ, AIS), with fixed seeds and stated\n"
     "settings, and prints the claim, the paper, the paper's figure, the measured figure and a verdict:\n"
     "reproduced (within the stated tolerance), differs (the detail line gives the settings and the\n"
     "most likely reason), not on CPU, or model (the figure of a model the project reconstructs, not a\n"
     "measurement).  Where the spec marks a recipe as the project's reconstruction,\n"
     "the detail says so.  docs/claims.md describes every measurement.\n"
     "\n"
     "  --quick        reduced sizes (same seeds), under a minute; exits 1 when a claim marked\n"
     "                 'must hold' (exact facts and bounds) does not reproduce -- `make test` runs it\n"
     "  --only PAT     only the claims whose id matches the glob PAT (e.g. 'hif8.*')\n"
     "  --plots DIR    write each claim's plot as DIR/claim-ID.png\n"
     "  --save         store the results in the database (result kind 'claim'), for `qscope report`\n"
     "  -v             print every claim's settings, not only for those that differ\n"
     "  --json         one JSON object\n"
     "  --list         list the claims", qs_cmd_claims},
    {"info", "[--json]", "summary of the database",
     "Prints the database path, schema version, counts of sources, tensors, elements and bytes\n"
     "(referenced and embedded), results and RL runs, and the largest tensors.", qs_cmd_info},
    {"demo", "[--force]", "fill the database with the demo set (tensors, an RL run, kernel results)",
     "Generates a varied synthetic set (Gaussian, Laplace, Student-t, uniform, log-normal weights\n"
     "and LLM-like activations with outlier channels), embeds the all-MiniLM-L6-v2 sample of\n"
     "datasets/sample, and runs a short `sim grpo` (60 steps, MXFP4 rollouts, one seed) and small\n"
     "`msd`, `attn` and `resq` measurements, so that every view of the workbench has content (a few\n"
     "seconds).  Does nothing if demo tensors already exist, unless --force.", qs_cmd_demo},
    {"check", "[--deep] [--json]", "verify the database and every tensor reference",
     "Runs SQLite's integrity and foreign-key checks and checks every referenced file (present,\n"
     "same size, modification time, status-change time, inode and device) and every embedded\n"
     "tensor (all chunks present and of the right size).  --deep also re-hashes every tensor's\n"
     "bytes against its stored hash.  Exit 1 if anything is wrong.", qs_cmd_check},
    {"schema", "", "print the database schema (SQL)",
     "Prints the SQL of the current schema, for use with sqlite3.", qs_cmd_schema},
    {"bench", "[formats [-f LIST] | analyze | rl | kernels | tui] [--score] [--quick] [--json] [--npy FILE]", "measure throughput",
     "`qscope bench` times the store's hot paths on generated data, min and median of repeated\n"
     "runs: hashing, decode of each storage dtype to float32, statistics (1 and 2 threads), and an\n"
     "end-to-end import of a .npy file (--npy FILE to use yours).\n"
     "\n"
     "`qscope bench formats` times fake-quantize and encode of every format (or the comma-separated\n"
     "-f LIST) on 16M float32 values, one and two threads, next to memcpy in the same run, and checks\n"
     "that two threads give the same bits as one and that decode(encode) equals fake-quantize.\n"
     "\n"
     "`qscope bench analyze` times the analysis (metrics and histograms) of a 64M-element tensor\n"
     "under 10 formats against fake-quantization alone, in the same run.\n"
     "\n"
     "`qscope bench rl` times the RL log path on a generated 4M-token log: parse only, import-log of\n"
     "CSV and JSONL into a fresh database, and ais over the stored run (tokens/s).\n"
     "\n"
     "`qscope bench kernels` times OpenBLAS SGEMM and, in the same run, FlashAttention-2 (L=4096,\n"
     "d=128), AMLA and the MSD two-pass INT8 GEMM, one thread then two, against the issue targets.\n"
     "`qscope bench --score` prints a CANN-Bench-style scorecard: per-dtype precision gates against\n"
     "FP64 and the hardware-anchored score against a plain C baseline and this machine's roofline.\n"
     "\n"
     "`qscope bench tui` times the workbench on a generated 10,000-tensor database (--tensors N):\n"
     "first frame (open, load, draw) and redraw after a key in every view, headless.\n"
     "--quick uses 1M values (smaller shapes for kernels).", qs_cmd_bench},
    {"plot", "KIND [TENSOR] -o FILE.png|- [-f F1,F2] [--width W --height H --dpi D --title T --logx --logy]",
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
     "  --fresh         ignore stored results\n"
     "Format options (--round, --scale-rule, --block, --axis, --gran, ...) apply to every format.\n"
     "Colour in the terminal only on a terminal with NO_COLOR unset; series differ by glyph too.",
     qs_cmd_plot},
    {"import-log", "FILE... [--run NAME] [--label TEXT] [--replace] [--json]",
     "import RL per-token log-probs (mmlog v1 CSV or JSONL) as a run",
     QS_IMPORT_LOG_HELP, qs_cmd_import_log},
    {"runs", "[PATTERN] [--json] | --rm RUN... | --export RUN [-o FILE.csv]", "list, remove or export stored RL runs",
     "Lists the RL runs (imported logs, simulations, scored models) with token and step counts.\n"
     "  --json         one JSON array with each run's metadata\n"
     "  --rm RUN...    delete runs and their tokens\n"
     "  --export RUN   write the run as an mmlog v1 CSV (exact values; original ids where known)\n"
     "                 to stdout or -o FILE; import-log reads it back to the same tokens", qs_cmd_runs},
    {"ais", "RUN [--method M] [--json | --csv | --weights] [AIS-R and correction options]",
     "mismatch diagnostics, AIS-R mixing coefficient and IS corrections of an RL run, per step",
     QS_AIS_HELP, qs_cmd_ais},
    {"sim", "grpo [--formats LIST] [--methods LIST] [--seeds N] [options]",
     "CPU GRPO simulation with quantized rollouts, comparing IS corrections over seeds",
     QS_SIM_HELP, qs_cmd_sim},
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
     "  --json               print the result JSON", qs_cmd_msd},
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
     "  --no-store --json", qs_cmd_attn},
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
     "  --seed S --no-store --json", qs_cmd_resq},
    {"llm", "score|capture|generate|logits|bench|tokenize|eval|sensitivity --model PATH [options] | text --rdb FILE -o DIR",
     "run a real causal LM (SmolLM2 GGUF): mismatch runs, activations, throughput",
     "A Llama or Qwen2 model (SmolLM2-135M-Instruct GGUF from `make data`, or your own GGUF / Hugging\n"
     "Face directory) through qscope's own FP32 forward pass (dequantized weights, OpenBLAS matmuls);\n"
     "the rollout numerics are simulated by fake-quantization.  See docs/llm.md.\n"
     "\n"
     "  score     sample --seqs continuations of --tokens tokens per prompt with the rollout numerics\n"
     "            (temperature 1, no top-k/p, --seed), re-score them with the FP32 reference and store\n"
     "            per-token (lp_rollout, lp_train) as an rl_run labelled 'precision mismatch without\n"
     "            training' (step = prompt, seq = sample, pos = generated-token index)\n"
     "  capture   store the inputs of every linear layer (attn_in, attn_out, ffn_in, ffn_down_in) of\n"
     "            one sampled sequence as tensors PREFIX:blk.L.SITE (tokens x channels) with outlier\n"
     "            channels in the metadata; --sites all adds k, v (cache entries) and resid\n"
     "  generate  print sampled text (detokenized from the GGUF vocabulary); --temp T (0 = greedy),\n"
     "            --top-k K, --top-p P, --greedy\n"
     "  logits    write the logits of --prompt-ids to -o OUT.npy (cross-checks)\n"
     "  bench     tokens/s of batched sampling and teacher-forced scoring, reference vs rollout\n"
     "            (best of --reps N, default 3), then the eval case: tokens/s and % of SGEMM\n"
     "            (--eval-ctx N, default 512; --eval-chunks K, default 2; --eval-ctx 0 skips it)\n"
     "  tokenize  print the token ids of --prompt TEXT (byte-level BPE, UTF-8 text)\n"
     "  text      --rdb Rdata.rdb [--rdx Rdata.rdx] -o DIR [--json]: write each character vector of\n"
     "            an R data package (Jane Austen's novels, r-cran-janeaustenr) as DIR/NAME.txt,\n"
     "            lines joined into paragraphs; `make data` writes data/text/ (default evaluation\n"
     "            text: data/text/persuasion.txt)\n"
     "  eval      perplexity of --text FILE (default data/text/persuasion.txt) under the FP32 reference\n"
     "            and each --config w=F,a=F,kv=F,resq=M: KL to the reference per token (mean, median,\n"
     "            p90, p99, max), same top token, RMS dp, dPPL with a 95% interval; llama.cpp's chunks\n"
     "            (--ctx N, default 512; --chunks K) and second-half scoring (--score half|all);\n"
     "            stored per variant and reused (--force recomputes); --json; --save-ids FILE\n"
     "  sensitivity  --format F [--sites attn_in,attn_out,ffn_in,ffn_down_in,kv,w]: one (layer, site)\n"
     "            at F at a time, all else FP32: mean KL and dPPL per layer x site (eval's chunks and\n"
     "            scoring); a greedy BF16 plan by KL per extra bit for --kl-target X or --bits-budget B\n"
     "            (average bits), verified by one eval of the combined plan; stored; --json; --force"
     "\n"
     "  --model PATH        GGUF file (llama or qwen2; any tensor type, e.g. F32/F16/BF16 or Q4_1) or a\n"
     "                      Hugging Face directory (config.json, *.safetensors, tokenizer.json); eval and\n"
     "                      sensitivity default to make data's data/models/SmolLM2-135M-Instruct.Q4_1.gguf\n"
     "  --rollout-format F  weights format (fp32 = none), e.g. mxfp4, nvfp4, hif4, fp8_e4m3, bf16;\n"
     "                      per-format options as in `analyze -f`, e.g. mxfp4:scale-rule=rceil\n"
     "  --act-format F      inputs of every linear layer, per token (default fp32)\n"
     "  --kv-format F       K (after RoPE) and V rows written to the KV cache (default fp32)\n"
     "  --resq none|dense|2:4  Rollout-ResQ residual correction of the activation rounding\n"
     "  --unscaled-casts    plain casts (fp8_*, fp6_*, fp4_e2m1, hif8) without the default per-row\n"
     "                      FP32 scale (per output channel for weights, per token for activations)\n"
     "  --tokens N          generated tokens per sequence (default 64)\n"
     "  --seqs K            sequences per prompt (default 4);  --prompts P  prompts (default 2)\n"
     "  --task open|arith   score: arith = chat prompts 'What is A + B?' (A, B in 1..9) with reward\n"
     "                      1/0 and advantage = reward - group mean; open (default) leaves them NULL\n"
     "  --prompt TEXT       prompt text (UTF-8), tokenized with the model's BPE vocabulary and merges\n"
     "  --chat              wrap --prompt in the model's ChatML template (system, user, assistant)\n"
     "  --prompt-ids LIST   prompt as comma-separated token ids; default prompts: the chat openings\n"
     "                      <|im_start|>assistant\\n, ...user\\n, ...system\\n\n"
     "  --seed S            sampling seed (default 0);  --name RUN  run name;  --prefix P  capture\n"
     "                      tensor prefix (default llm-act);  --json  score summary as JSON",
     qs_cmd_llm},
    {"tui", "[--formats LIST] [--no-mouse] [--ascii]", "open the workbench (also: qscope with no command, on a terminal)",
     "The interactive workbench: tensors, formats compared, error histograms, block-error heatmaps and\n"
     "the block inspector (every element's code bit by bit, in two formats side by side), RL runs and\n"
     "kernel results.  Missing results are computed in a background thread (Esc cancels); `:` runs any\n"
     "qscope command; `e` exports the plot on screen to PNG ($QSCOPE_EXPORT_DIR or the current\n"
     "directory); `?` lists every key.  See docs/workbench.md.\n"
     "\n"
     "  --formats LIST  the formats to compare, as in analyze (default: the report's list)\n"
     "  --no-mouse      leave the mouse to the terminal (selecting text)\n"
     "  --ascii         ASCII glyphs only (also on TERM=vt* or a non-UTF-8 locale)", qs_cmd_tui},
    {NULL, NULL, NULL, NULL, NULL},
};

const qs_command *qs_command_find(const char *name)
{
    for (const qs_command *c = qs_commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f,
            "qscope %s — see where low-precision number formats lose precision\n"
            "\n"
            "usage: qscope [--db PATH] [--rank-timeout SECONDS] COMMAND [ARGS]\n"
            "       qscope help COMMAND | --help | --version\n"
            "\n"
            "commands:\n", QS_VERSION);
    for (const qs_command *c = qs_commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f,
            "\n"
            "The database is --db PATH, else $QSCOPE_DB, else ./qscope.db (created on first use).\n"
            "Under `mpirun -np N`, a rank silent for --rank-timeout SECONDS (default %.0f; 0 = never),\n"
            "e.g. a stopped process, ends the job with one line naming it; nothing of an unfinished\n"
            "step is stored (docs/scale.md).\n"
            "Exit status: 0 success, 1 error, 2 usage error.  NO_COLOR disables colour.\n", QS_PAR_TIMEOUT_DEFAULT);
}

/* Levenshtein distance, for "did you mean": command names are short */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 63 || lb >= 63) return (size_t)-1;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* One line for a name that is not a command, with the nearest command when one is close. */
static int unknown_command(const char *what, const char *name)
{
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (const qs_command *c = qs_commands; c->name; c++) {
        size_t d = edit_distance(name, c->name);
        if (d < bd) { bd = d; best = c->name; }
    }
    size_t n = strlen(name);
    if (best && bd <= (n > 4 ? 2u : 1u))
        return qs_cli_error(QS_EXIT_USAGE, "%s '%s' (did you mean '%s'?)", what, name, best);
    return qs_cli_error(QS_EXIT_USAGE, "%s '%s' (see `qscope --help`)", what, name);
}

static int help_command(const char *name)
{
    const qs_command *c = qs_command_find(name);
    if (!c) return unknown_command("no such command", name);
    printf("usage: qscope [--db PATH] %s %s\n\n%s\n\n%s\n", c->name, c->args, c->summary, c->help);
    return QS_EXIT_OK;
}

/* The commands that split their work over the ranks of `mpirun -np N qscope ...` (app/par.h). */
static int sharded_command(int argc, char **argv)
{
    static const char *const cmds[] = {"analyze", "report", "claims", "llm eval", "llm sensitivity", "sim grpo"};
    for (size_t k = 0; k < sizeof cmds / sizeof *cmds; k++) {
        const char *sp = strchr(cmds[k], ' ');
        size_t l = sp ? (size_t)(sp - cmds[k]) : strlen(cmds[k]);
        if (strncmp(argv[0], cmds[k], l) || argv[0][l]) continue;
        if (!sp || (argc > 1 && !strcmp(argv[1], sp + 1))) return 1;
    }
    return 0;
}

/* --rank-timeout SECONDS: a whole number of seconds, 0 (never) to 10^6; a usage error otherwise. */
static int rank_timeout(const char *v, double *s)
{
    char *end = NULL;
    long n = v && *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
    if (!v || n < 0 || n > 1000000 || *end)
        return qs_cli_error(QS_EXIT_USAGE, "--rank-timeout needs a whole number of seconds from 0 (none) to 1000000%s%s%s",
                            v ? ", not '" : "", v ? v : "", v ? "'" : "");
    *s = (double)n;
    return 0;
}

int main(int argc, char **argv)
{
    /* Past `ulimit -f` a write then fails with EFBIG, reported like any other, instead of a kill. */
    signal(SIGXFSZ, SIG_IGN);
    qs_blas_core_fix(argc, argv);
    qs_cli cli = {0};
    cli.argc = argc;
    cli.argv = argv;
    cli.db_path = getenv("QSCOPE_DB");
    if (!cli.db_path || !*cli.db_path) cli.db_path = "qscope.db";
    const char *nc = getenv("NO_COLOR");
    cli.color = isatty(STDOUT_FILENO) && !(nc && *nc);

    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--db") == 0) {
            if (++i >= argc) return qs_cli_error(QS_EXIT_USAGE, "--db needs a path");
            cli.db_path = argv[i];
        } else if (strncmp(a, "--db=", 5) == 0) {
            cli.db_path = a + 5;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return QS_EXIT_OK;
        } else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("qscope %s (%s)\n", QS_VERSION, QS_GIT_REV);
            return QS_EXIT_OK;
        } else if (strcmp(a, "--no-color") == 0) {
            cli.color = 0;
        } else if (strcmp(a, "--rank-timeout") == 0 || strncmp(a, "--rank-timeout=", 15) == 0) {
            const char *v = a[14] == '=' ? a + 15 : ++i < argc ? argv[i] : NULL;
            double s = 0;
            if (rank_timeout(v, &s)) return QS_EXIT_USAGE;
            qs_par_set_timeout(s);
        } else {
            return qs_cli_error(QS_EXIT_USAGE, "unknown option '%s' (see `qscope --help`)", a);
        }
    }
    if (i >= argc) {
        /* No command: the workbench on a terminal, else the help (a script or pipe gets no
        ** database created behind its back) */
        if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
            char *targs[] = {"tui", NULL};
            return qs_cmd_tui(&cli, 1, targs);
        }
        usage(stdout);
        return QS_EXIT_OK;
    }
    const char *name = argv[i];
    if (strcmp(name, "help") == 0) {
        if (i + 1 >= argc) { usage(stdout); return QS_EXIT_OK; }
        return help_command(argv[i + 1]);
    }
    if (strcmp(name, "version") == 0) {
        printf("qscope %s (%s)\n", QS_VERSION, QS_GIT_REV);
        return QS_EXIT_OK;
    }
    const qs_command *c = qs_command_find(name);
    if (!c) return unknown_command("unknown command", name);
    for (int k = i + 1; k < argc; k++)
        if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) return help_command(name);
    qs_err pe = {{0}};
    if (qs_par_init(&argc, &argv, &pe)) return qs_cli_err(QS_EXIT_ERR, &pe);
    cli.argv = argv;
    cli.color = qs_par_isatty(STDOUT_FILENO) && !(nc && *nc);
    /* under mpirun, a command that does not shard its work runs on rank 0 alone */
    if (!sharded_command(argc - i, argv + i)) {
        if (qs_par_rank() > 0) return qs_par_exit(QS_EXIT_OK);
        qs_par_alone();
    }
    return qs_par_exit(c->run(&cli, argc - i, argv + i));
}
