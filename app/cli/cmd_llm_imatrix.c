/*
** `qscope llm imatrix`: llama.cpp's importance matrix computed with qscope's forward pass over a text
** (analysis/llm_imatrix.h), written in llama-imatrix's GGUF or legacy .dat format; `--show FILE`
** reads either format and lists its entries (docs/llm.md, "Importance matrices").
*/
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "llm_text_run.h"
#include "../../analysis/llm_imatrix.h"
#include "../../store/imatrix.h"
#include "../../store/text_escape.h"

#define CMD "llm imatrix"

typedef struct im_opts {
    const char *model, *text, *out, *show;
    int ctx, chunks, dat, process_output;
} im_opts;

static int parse(int argc, char **argv, im_opts *o)
{
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'}, {"text", required_argument, 0, 't'}, {"ctx", required_argument, 0, 'c'},
        {"chunks", required_argument, 0, 'k'}, {"out", required_argument, 0, 'o'}, {"format", required_argument, 0, 'f'},
        {"process-output", no_argument, 0, 'P'}, {"show", required_argument, 0, 's'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->ctx = 512;
    o->dat = -1;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":o:", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 't': o->text = optarg; break;
        case 'c': if (qs_cli_parse_int(CMD, "--ctx", optarg, 16, 1 << 20, &o->ctx)) return QS_EXIT_USAGE; break;
        case 'k': if (qs_cli_parse_int(CMD, "--chunks", optarg, 1, 1 << 24, &o->chunks)) return QS_EXIT_USAGE; break;
        case 'o': o->out = optarg; break;
        case 'f':
            if (!strcmp(optarg, "dat")) o->dat = 1;
            else if (!strcmp(optarg, "gguf")) o->dat = 0;
            else return qs_cli_usage(CMD, "--format is gguf or dat, not '%s'", optarg);
            break;
        case 'P': o->process_output = 1; break;
        case 's': o->show = optarg; break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->show) {
        if (o->model || o->text || o->out) return qs_cli_usage(CMD, "--show FILE reads a file: no --model, --text or -o");
        return 0;
    }
    if (!o->model || !o->text || !o->out) return qs_cli_usage(CMD, "give --model PATH, --text FILE and -o FILE");
    /* llama-imatrix: GGUF unless --output-format dat (a name not ending in .gguf only warns there) */
    if (o->dat < 0) {
        size_t n = strlen(o->out);
        o->dat = n > 4 && !strcmp(o->out + n - 4, ".dat");
    }
    return 0;
}

/* One line per entry: name, columns, matrices, tokens (GGUF) or ncall (.dat), mean importance as
** llama-quantize sees it. */
static int show(const char *path)
{
    qs_imatrix m;
    qs_err e = {{0}};
    if (qs_imatrix_read(path, &m, NULL, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    char cs[32] = "";
    if (m.chunk_size > 0) snprintf(cs, sizeof cs, " of %lld tokens", (long long)m.chunk_size);
    printf("# %s: %s, %d entries, %lld chunks%s%s%s\n", qs_esc(path), m.legacy ? "legacy .dat" : "GGUF", m.n,
           (long long)m.chunk_count, cs, m.ndatasets ? ", dataset " : "", m.ndatasets ? qs_esc(m.datasets[0]) : "");
    printf("%-40s %8s %4s %12s %14s\n", "tensor", "columns", "mats", m.legacy ? "ncall" : "tokens", "mean_weight");
    int rc = 0;
    for (int i = 0; i < m.n && !rc; i++) {
        const qs_imat_entry *en = &m.e[i];
        float *w = NULL;
        if (qs_imatrix_weights(&m, en, &w, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); break; }
        double s = 0;
        size_t n = (size_t)(en->ne0 * en->nmat);
        for (size_t j = 0; j < n; j++) s += w[j];
        free(w);
        printf("%-40s %8lld %4lld %12.0f %14.6g\n", qs_esc(en->name), (long long)en->ne0, (long long)en->nmat, en->counts[0],
               s / (double)n);
    }
    qs_imatrix_free(&m);
    return rc;
}

static void progress(void *ctx, int done, int total)
{
    (void)ctx;
    if (!isatty(2)) return;
    fprintf(stderr, "\rqscope: imatrix chunk %d/%d", done, total);
    if (done == total) fputc('\n', stderr);
}

int qs_cmd_llm_imatrix(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    im_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    if (o.show) return show(o.show);
    qs_llm_text_run r;
    /* llama-imatrix wants two chunks of text, as the second-half scoring does */
    if ((rc = qs_llm_text_run_open(&r, CMD, o.model, o.text, o.ctx, o.chunks, 0, NULL))) { qs_llm_text_run_free(&r); return rc; }
    qs_imatrix m;
    qs_err e = {{0}};
    const int computed = qs_llm_imatrix_compute(&r.f.m, r.ids, &r.su, o.process_output, o.text, progress, NULL, &m, &e) == 0;
    if (!computed || (o.dat ? qs_imatrix_write_dat(o.out, &m, &e) : qs_imatrix_write_gguf(o.out, &m, &e)))
        rc = qs_cli_err(QS_EXIT_ERR, &e);
    else
        printf("wrote %s: %s, %d entries, %d chunks of %d tokens\n", qs_esc(o.out), o.dat ? "legacy .dat" : "GGUF", m.n,
               r.su.nchunks, r.su.ctx);
    if (computed) qs_imatrix_free(&m);   /* also when writing failed */
    qs_llm_text_run_free(&r);
    return rc;
}
