/*
** `qscope gen model`: a random Llama-architecture GGUF of a real model's shape (store/llm_gen.h), for
** tests and benchmarks of models larger than memory (`llm eval --weights mapped`).  Written as it is
** generated, never whole in memory; refused when the disk has not room for it.
*/
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cli.h"
#include "../../store/llm_gen.h"

#define CMD "gen model"

/* A usage error pointing at `qscope help gen` (gen has no subcommand table, so no `help gen model`). */
__attribute__((format(printf, 1, 2))) static int usage(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qs_cli_usage(CMD, "%s (see `qscope help gen`)", msg);
}

int qs_cmd_gen_model(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    static const struct option lo[] = {
        {"arch", required_argument, 0, 'a'}, {"params", required_argument, 0, 'p'}, {"dtype", required_argument, 0, 't'},
        {"seed", required_argument, 0, 's'}, {"layers", required_argument, 0, 'l'}, {"tied", no_argument, 0, 'T'},
        {0, 0, 0, 0}};
    const char *size = "tiny", *dt = "bf16", *out = NULL;
    int layers = 0, seed = 1, tied = 0, ch, rc;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":o:", lo, NULL)) != -1) {
        switch (ch) {
        case 'a': if (strcmp(optarg, "llama")) return usage("--arch: only llama is generated, not '%s'", optarg); break;
        case 'p': size = optarg; break;
        case 't': dt = optarg; break;
        case 'o': out = optarg; break;
        case 's': if ((rc = qs_cli_parse_int("gen", "--seed", optarg, 0, 1 << 30, &seed))) return rc; break;
        case 'l': if ((rc = qs_cli_parse_int("gen", "--layers", optarg, 1, 4096, &layers))) return rc; break;
        case 'T': tied = 1; break;
        case ':': return usage("option %s needs a value", argv[optind - 1]);
        default: return usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return usage("unexpected argument '%s'", argv[optind]);
    if (!out) return usage("-o FILE.gguf is required");
    qs_llm_gen g = {.dt = qs_llm_gen_dtype(dt), .tied = tied, .seed = (uint64_t)seed};
    qs_err e = {{0}};
    if (qs_llm_gen_preset(size, &g.c, &e)) return usage("--params: %s", e.msg);
    if (g.dt == QS_DT_INVALID)
        return usage("--dtype: '%s' is not f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k or q6_k", dt);
    if (layers) g.c.n_layer = layers;
    const uint64_t bytes = qs_llm_gen_bytes(&g);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0; else snprintf(dir, sizeof dir, ".");
    struct statvfs vs;
    if (statvfs(dir, &vs) == 0 && (uint64_t)vs.f_bavail * vs.f_frsize < bytes + ((uint64_t)1 << 30))
        return qs_cli_error(QS_EXIT_ERR, "%s: %.2f GiB free, the model needs %.2f GiB (and 1 GiB to spare)", out,
                            (double)vs.f_bavail * vs.f_frsize / 1073741824.0, bytes / 1073741824.0);
    uint64_t params = 0;
    if (qs_llm_gen_write(&g, out, &params, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    printf("wrote %s: random llama, %llu parameters (%.2f GiB of %s): %d layers, dim %d, ffn %d, %d/%d heads of %d, vocab %d%s\n",
           out, (unsigned long long)params, bytes / 1073741824.0, qs_dtype_get(g.dt)->name, g.c.n_layer, g.c.dim, g.c.ffn,
           g.c.n_head, g.c.n_kv_head, g.c.head_dim, g.c.vocab, tied ? ", tied embeddings" : "");
    return 0;
}
