/*
** `qscope bench quantize`: an F32 GGUF quantized to each of llama.cpp's types by qscope (the registry's
** ggml codecs, kernels/format_imatrix.h) and, in the same run, by llama.cpp's llama-quantize (--peer
** PATH or QS_LLAMA_QUANTIZE; --pure, the same thread count, --imatrix when given): seconds and MB/s of
** F32 input side by side, and every block of the tensors llama-quantize wrote in that type compared with
** qscope's (tensors whose rows are not whole blocks, which llama-quantize gives another type, are left
** out of the comparison).  qscope's time is the quantization in memory of the tensors with whole-block
** rows; llama-quantize's is its own "quantize time" line over every F32 matrix (it reads the F32 file and
** writes the output too, and gives a matrix whose rows are not whole blocks another type); each MB/s is
** over the F32 bytes that side quantized.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "bench_util.h"
#include "../../kernels/format_imatrix.h"
#include "../../kernels/pool.h"
#include "../../store/container.h"
#include "../../store/gguf_tensors.h"
#include "../../store/imatrix.h"
#include "../../store/text_escape.h"

#define CMD "bench quantize"
#define DEFAULT_TYPES "q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_nl,iq4_xs"

typedef struct bq_opts { const char *model, *peer, *imatrix; char types[256]; int threads; } bq_opts;

static int parse(int argc, char **argv, bq_opts *o)
{
    memset(o, 0, sizeof *o);
    o->peer = getenv("QS_LLAMA_QUANTIZE");
    snprintf(o->types, sizeof o->types, "%s", DEFAULT_TYPES);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return qs_cli_usage(CMD, "unexpected argument '%s' (options take a value)", a);
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--peer")) o->peer = v;
        else if (!strcmp(a, "--imatrix")) o->imatrix = v;
        else if (!strcmp(a, "--types")) {
            if (strlen(v) >= sizeof o->types) return qs_cli_usage(CMD, "--types: list too long");
            snprintf(o->types, sizeof o->types, "%s", v);
        } else if (!strcmp(a, "--threads")) { if (qs_cli_parse_int(CMD, "--threads", v, 1, QS_POOL_MAX, &o->threads)) return QS_EXIT_USAGE; }
        else return qs_cli_usage(CMD, "unknown option '%s'", a);
    }
    if (!o->model) return qs_cli_usage(CMD, "--model F32.gguf is required");
    if (o->peer && !o->peer[0]) o->peer = NULL;
    if (!o->threads) o->threads = qs_pool_width(0, QS_POOL_MAX);
    return 0;
}

/* The tensors both sides quantize: F32, two or more dimensions, rows of whole blocks. */
static int eligible(const qs_gguf_tensor *t, int blk) { return t->type == 0 && t->nd >= 2 && t->ne[0] % (uint64_t)blk == 0; }

typedef struct bq_type {
    const qs_format *f;
    int blk, bytes, id;
    uint8_t **mine;           /* per tensor: qscope's blocks (NULL when not eligible) */
    double secs, in_bytes;   /* qscope: over the eligible tensors */
    double peer_bytes;        /* every F32 matrix: what llama-quantize --pure quantizes (in this type or another) */
} bq_type;

/* qscope's blocks of every eligible tensor, timed (importances looked up before the clock starts). */
static int ours(const qs_file_map *fm, const qs_gguf_tensor *t, size_t nt, const qs_imatrix *im, int threads, bq_type *q, qs_err *e)
{
    if (!(q->mine = calloc(nt, sizeof *q->mine))) return qs_fail(e, "out of memory");
    for (size_t i = 0; i < nt; i++) {
        if (t[i].type == 0 && t[i].nd >= 2) q->peer_bytes += (double)t[i].nel * 4;
        if (!eligible(&t[i], q->blk)) continue;
        size_t rows = (size_t)(t[i].nel / t[i].ne[0]), cols = (size_t)t[i].ne[0];
        if (t[i].off > fm->n || t[i].nel * 4 > fm->n - t[i].off) return qs_fail(e, "tensor '%s': data past the end", qs_esc(t[i].name));
        float *qw = NULL;
        const qs_imat_entry *en = im ? qs_imatrix_find(im, t[i].name) : NULL;
        if (en && (uint64_t)(en->ne0 * en->nmat) == t[i].ne[0] && qs_imatrix_weights(im, en, &qw, e)) return -1;
        if (!(q->mine[i] = malloc(rows * (cols / (size_t)q->blk) * (size_t)q->bytes))) { free(qw); return qs_fail(e, "out of memory"); }
        /* the mapped file is float32 little-endian, 32-byte aligned data: read in place */
        double t0 = qs_now_s();
        int rc = qs_format_quantize_ggml(q->f, (const float *)(fm->p + t[i].off), rows, cols, qw, q->mine[i], threads, e);
        q->secs += qs_now_s() - t0;
        q->in_bytes += (double)t[i].nel * 4;
        free(qw);
        if (rc) return -1;
    }
    return 0;
}

/* llama-quantize --pure on the model: its "quantize time" in seconds (or -1), the output at out. */
static double peer_run(const bq_opts *o, const char *type, const char *out)
{
    char cmd[16384], up[16], line[4096];
    size_t k = 0;
    for (; type[k] && k + 1 < sizeof up; k++) up[k] = (char)(type[k] >= 'a' && type[k] <= 'z' ? type[k] - 32 : type[k]);
    up[k] = 0;
    snprintf(cmd, sizeof cmd, "'%s' --pure %s%s%s '%s' '%s' %s %d 2>&1", o->peer, o->imatrix ? "--imatrix '" : "",
             o->imatrix ? o->imatrix : "", o->imatrix ? "'" : "", o->model, out, up, o->threads);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    double ms = -1;
    while (fgets(line, sizeof line, p)) {
        const char *q = strstr(line, "quantize time =");
        if (q) ms = atof(q + 15);
    }
    return pclose(p) == 0 ? ms / 1e3 : -1;
}

/* Blocks of the peer's tensors of this type against qscope's: differing count into *diff. */
static int compare(const char *out, const qs_gguf_tensor *src, size_t nt, const bq_type *q, size_t *blocks, size_t *diff, qs_err *e)
{
    qs_file_map pm;
    qs_gguf_tensor *pt = NULL;
    size_t np = 0;
    if (qs_file_map_open(out, &pm, e)) return -1;
    int rc = qs_gguf_tensors(pm.p, pm.n, &pt, &np, e);
    for (size_t i = 0; !rc && i < np; i++) {
        if (pt[i].type != (uint32_t)q->id) continue;
        size_t j = 0;
        while (j < nt && strcmp(src[j].name, pt[i].name)) j++;
        if (j == nt || !q->mine[j]) continue;   /* a tensor qscope did not quantize (not F32, partial rows) */
        size_t nb = (size_t)(pt[i].nel / (uint64_t)q->blk), bb = (size_t)q->bytes;
        if (pt[i].off > pm.n || nb * bb > pm.n - pt[i].off) { rc = qs_fail(e, "%s: tensor '%s' truncated", out, qs_esc(pt[i].name)); break; }
        for (size_t b = 0; b < nb; b++) *diff += memcmp(q->mine[j] + b * bb, pm.p + pt[i].off + b * bb, bb) != 0;
        *blocks += nb;
    }
    qs_gguf_tensors_free(pt, np);
    qs_file_map_close(&pm);
    return rc;
}

static int run_type(const bq_opts *o, const qs_file_map *fm, const qs_gguf_tensor *t, size_t nt, const qs_imatrix *im,
                    const char *type, const char *tmpdir)
{
    bq_type q = {qs_format_find(type), 0, 0, 0, NULL, 0, 0, 0};
    qs_err e = {{0}};
    if (!q.f || qs_format_ggml_block(q.f, &q.blk, &q.bytes, &q.id) || q.id < 0)
        return qs_cli_usage(CMD, "--types: '%s' is not one of llama.cpp's weight types (%s)", type, DEFAULT_TYPES);
    int rc = ours(fm, t, nt, im, o->threads, &q, &e) ? qs_cli_err(QS_EXIT_ERR, &e) : 0;
    if (!rc && q.in_bytes == 0) printf("%-8s (no F32 matrix has rows of whole blocks of %d)\n", type, q.blk);
    else if (!rc) {
        printf("%-8s %9.3f %9.1f", type, q.secs, q.in_bytes / 1e6 / q.secs);
        if (o->peer) {
            char out[4200];
            snprintf(out, sizeof out, "%s/%s.gguf", tmpdir, type);
            double ps = peer_run(o, type, out);
            size_t blocks = 0, diff = 0;
            if (ps > 0 && !compare(out, t, nt, &q, &blocks, &diff, &e))
                printf(" %9.3f %9.1f %7.2fx %10zu %9zu", ps, q.peer_bytes / 1e6 / ps, q.in_bytes / q.secs / (q.peer_bytes / ps),
                       blocks, diff);
            else printf("   (llama-quantize failed%s%s)", e.msg[0] ? ": " : "", e.msg);
            unlink(out);
        }
        putchar('\n');
        fflush(stdout);
    }
    for (size_t i = 0; q.mine && i < nt; i++) free(q.mine[i]);
    free(q.mine);
    return rc;
}

int qs_bench_quantize(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    bq_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    qs_err e = {{0}};
    qs_file_map fm;
    qs_gguf_tensor *t = NULL;
    size_t nt = 0;
    qs_imatrix im, *imp = NULL;
    if (o.imatrix) {
        if (qs_imatrix_read(o.imatrix, &im, NULL, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
        imp = &im;
    }
    if (qs_file_map_open(o.model, &fm, &e)) { if (imp) qs_imatrix_free(imp); return qs_cli_err(QS_EXIT_ERR, &e); }
    if (qs_gguf_tensors(fm.p, fm.n, &t, &nt, &e)) {
        qs_err_prefix(&e, qs_esc(o.model));
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        goto done;
    }
    char tmpdir[4096] = "";
    if (o.peer && qs_cli_tempdir("bench-quantize", tmpdir, sizeof tmpdir)) {
        rc = qs_cli_error(QS_EXIT_ERR, "cannot make a temporary directory (TMPDIR)");
        goto done;
    }
    printf("bench quantize: %s, %d threads%s%s\n", qs_esc(o.model), o.threads, o.imatrix ? ", imatrix " : "",
           o.imatrix ? qs_esc(o.imatrix) : "");
    printf("%-8s %9s %9s", "type", "qscope_s", "MB/s");
    if (o.peer) printf(" %9s %9s %8s %10s %9s", "peer_s", "MB/s", "qs/peer", "blocks", "differing");
    putchar('\n');
    char *save = NULL;
    for (char *ty = strtok_r(o.types, ",", &save); ty && !rc; ty = strtok_r(NULL, ",", &save)) rc = run_type(&o, &fm, t, nt, imp, ty, tmpdir);
    if (o.peer) {
        rmdir(tmpdir);
        printf("# peer: %s --pure, its own \"quantize time\" (reading the F32 file and writing the output included) over\n"
               "# every F32 matrix; qscope's MB/s over the matrices whose rows are whole blocks (the others llama-quantize\n"
               "# gives another type); qs/peer: the ratio of the two MB/s; blocks: those llama-quantize wrote in the type\n", qs_esc(o.peer));
    }
done:
    qs_gguf_tensors_free(t, nt);
    qs_file_map_close(&fm);
    if (imp) qs_imatrix_free(imp);
    return rc;
}
