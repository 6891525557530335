/*
** `qscope quant`: fake-quantize numbers from stdin, a tensor file, or a database tensor.
**
** The stdin contract is relied on by tests outside the project: whitespace-separated numbers
** (decimal, hex floats, nan, inf, -inf), each rounded to float32 first (strtof); one output per
** line with %.9g and the spellings nan, inf, -inf; block formats group consecutive values in input
** order, a final partial block being its own block; NVFP4's per-tensor scale covers all values.
*/
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "../../analysis/importer.h"
#include "quant_opts.h"
#include "../../analysis/quant_stream.h"
#include "../../kernels/qs_version.h"
#include "../../store/container.h"
#include "../../store/npy_write.h"
#include "../../store/tensor.h"
#include "../../store/json_out.h"
#include "../../kernels/format_imatrix.h"
#include "../../kernels/pool.h"
#include "llm_imatrix_opt.h"

void qs_print_value(FILE *f, float v)
{
    if (isnan(v)) fputs("nan\n", f);
    else if (isinf(v)) fputs(v > 0 ? "inf\n" : "-inf\n", f);
    else fprintf(f, "%.9g\n", (double)v);
}

/* Read every whitespace-separated number from stdin. */
static int read_stdin_values(float **out, size_t *n)
{
    size_t cap = 1 << 16, len = 0, vcap = 1024, nv = 0;
    char *buf = malloc(cap + 1);
    float *v = malloc(vcap * sizeof *v);
    if (!buf || !v) { free(buf); free(v); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    for (;;) {
        if (len == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) { free(buf); free(v); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
            buf = nb; cap *= 2;
        }
        ssize_t k = read(STDIN_FILENO, buf + len, cap - len);
        if (k < 0) { if (errno == EINTR) continue; free(buf); free(v); return qs_cli_error(QS_EXIT_ERR, "stdin: %s", strerror(errno)); }
        if (k == 0) break;
        len += (size_t)k;
    }
    buf[len] = 0;
    char *p = buf;
    size_t tok = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
        if (!*p) break;
        tok++;
        char *end;
        errno = 0;
        float x = strtof(p, &end);   /* one correctly rounded conversion: no double rounding */
        if (end == p || (*end && !strchr(" \t\n\r\f\v", *end))) {
            char bad[40];
            size_t bl = strcspn(p, " \t\n\r\f\v");
            snprintf(bad, sizeof bad, "%.*s", (int)(bl > 32 ? 32 : bl), p);
            free(buf); free(v);
            return qs_cli_error(QS_EXIT_ERR, "stdin: value %zu ('%s') is not a number", tok, bad);
        }
        if (nv == vcap) {
            float *nvp = realloc(v, 2 * vcap * sizeof *v);
            if (!nvp) { free(buf); free(v); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
            v = nvp; vcap *= 2;
        }
        v[nv++] = x;
        p = end;
    }
    free(buf);
    *out = v;
    *n = nv;
    return 0;
}

static int quant_stdin(qs_apply *a, int codes)
{
    float *x = NULL;
    size_t n = 0;
    int rc = read_stdin_values(&x, &n);
    if (rc) return rc;
    qs_err e = {{0}};
    qs_qopts o = a->o;
    if (a->gran == QS_GRAN_TENSOR) o.block = 0;
    float *y = malloc((n ? n : 1) * sizeof *y);
    if (!y) { free(x); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
    /* a scaled cast: stdin is one run (tensor = row); the codes are those of x * s */
    float cs = 0, ci = 0;
    if (a->cscale == QS_CSCALE_COL) { free(x); free(y); return qs_cli_usage("quant", "scale=col needs a 2-D tensor (stdin is one row)"); }
    if (a->cscale) {
        float amax = 0;
        for (size_t i = 0; i < n; i++) { float v = fabsf(x[i]); if (v > amax && v != INFINITY) amax = v; }
        qs_cast_scale_of(a->f, amax, &cs, &ci);
    }
    if (!codes) {
        if (n && (cs != 0 ? qs_cast_scaled_apply(a->f, &o, x, n, &cs, &ci, 0, y, &e) : a->f->fakeq(a->f, &o, x, n, y, &e)))
            rc = qs_cli_err(QS_EXIT_ERR, &e);
        else for (size_t i = 0; i < n; i++) qs_print_value(stdout, y[i]);
    } else {
        size_t nb = qs_format_nblocks(a->f, &o, n), blk = qs_format_block(a->f, &o);
        uint32_t *c = malloc((n ? n : 1) * sizeof *c);
        uint8_t *meta = malloc(nb * (size_t)a->f->meta_bytes + 1);
        float ts = 1;
        if (cs != 0)
            for (size_t i = 0; i < n; i++) x[i] *= cs;
        if (!c || !meta) rc = qs_cli_error(QS_EXIT_ERR, "out of memory");
        else if (n && a->f->encode(a->f, &o, x, n, c, meta, &ts, &e)) rc = qs_cli_err(QS_EXIT_ERR, &e);
        else {
            int w = (a->f->elem_bits + 3) / 4;
            for (size_t i = 0; i < n; i++) {
                printf("0x%0*x", w, c[i]);
                if (a->f->meta_bytes) {
                    size_t b = blk ? i / blk : 0;
                    printf(" 0x");
                    for (int k = 0; k < a->f->meta_bytes; k++) printf("%02x", meta[b * (size_t)a->f->meta_bytes + (size_t)k]);
                }
                if (a->f->has_tensor_scale) printf(" %.9g", (double)ts);
                if (a->cscale) printf(" %.9g", (double)(cs != 0 ? ci : 1.0f));   /* value = decode(code) * this */
                printf("\n");
            }
        }
        free(c);
        free(meta);
    }
    free(x);
    free(y);
    return rc;
}

/* ---- tensors: a file or a database tensor, streamed into an .npy ---- */

/* Quantize r into the .npy at path ("-": stdout): on failure no file is left at path. */
static int quant_to_npy(qs_apply *a, qs_treader *r, const uint64_t *shape, int ndim, const char *path, qs_err *e)
{
    qs_npy_writer w;
    if (qs_npy_writer_open(&w, path, shape, ndim, e)) return -1;
    if (qs_quant_stream(a, r, shape, ndim, &w, 0, e)) { qs_npy_writer_abort(&w); return -1; }
    return qs_npy_writer_close(&w, e);
}

static int quant_file(qs_apply *a, const char *in, const char *out)
{
    qs_err e = {{0}};
    int fd = qs_open_regular(in, &e);   /* the file may have become a FIFO since the caller's stat */
    if (fd < 0) return qs_cli_err(QS_EXIT_ERR, &e);
    struct stat st;
    if (fstat(fd, &st) || st.st_size == 0) { close(fd); return qs_cli_error(QS_EXIT_ERR, "%s: empty or unreadable file", in); }
    qs_container c = {0};
    qs_parse_opts po = {0};
    int rc = QS_EXIT_ERR;
    qs_treader *r = NULL;
    if (qs_parse_fd(fd, (uint64_t)st.st_size, in, &po, &c, &e)) { qs_err_prefix(&e, in); qs_cli_err(1, &e); goto done; }
    if (c.n != 1) { qs_cli_error(1, "%s: holds %zu tensors; quant takes a file with one (import it and name the tensor)", in, c.n); goto done; }
    if (!(r = qs_treader_from_fd(fd, &c.t[0], in, &e))) { qs_cli_err(1, &e); goto done; }
    if (quant_to_npy(a, r, c.t[0].shape, c.t[0].ndim, out, &e)) {
        const char *on = strcmp(out, "-") ? out : "<stdout>";
        if (strncmp(e.msg, in, strlen(in)) && strncmp(e.msg, on, strlen(on))) qs_err_prefix(&e, in);
        qs_cli_err(1, &e);
        goto done;
    }
    if (strcmp(out, "-") != 0) fprintf(stderr, "qscope: wrote %s (%s)\n", qs_esc(out), a->f->name);
    rc = QS_EXIT_OK;
done:
    qs_treader_close(r);
    qs_container_free(&c);
    close(fd);
    return rc;
}

/* -f F:imatrix=FILE on a stored tensor: its entry (by the tensor's name, or the name after the import's
** "FILE:" prefix), the whole tensor rounded in memory, rows of its last dimension. */
typedef struct quant_imat { const char *path; qs_imatrix *m; char hash[33]; } quant_imat;

static int quant_imat_npy(const qs_apply *a, const quant_imat *qi, const char *name, qs_treader *r, const uint64_t *shape, int ndim,
                          const char *path, qs_err *e)
{
    const qs_imat_entry *en = qs_imatrix_find(qi->m, name);
    const char *colon = strchr(name, ':');
    if (!en && colon) en = qs_imatrix_find(qi->m, colon + 1);
    uint64_t n = qs_treader_numel(r), cols = ndim ? shape[ndim - 1] : n;
    if (en && (uint64_t)(en->ne0 * en->nmat) != cols)
        return qs_fail(e, "imatrix size %lld is different from tensor size %llu for %s (llama-quantize refuses it too)",
                       (long long)(en->ne0 * en->nmat), (unsigned long long)cols, qs_esc(name));
    if (!en) fprintf(stderr, "qscope: quant: note: %s has no entry for %s: rounded without importances, as llama-quantize does\n",
                     qs_esc(qi->path), qs_esc(name));
    float *x = n < ((uint64_t)1 << 31) ? malloc(n * sizeof *x) : NULL, *qw = NULL;
    qs_npy_writer w;
    int rc = -1;
    if (!x) return qs_fail(e, "%s: %llu values are too many to round in memory", qs_esc(name), (unsigned long long)n);
    if (!qs_treader_read_f32(r, 0, n, x, e) && (!en || !qs_imatrix_weights(qi->m, en, &qw, e)) &&
        !qs_format_fakeq_imatrix(a, x, n / cols, cols, qw, 0, e) && !qs_npy_writer_open(&w, path, shape, ndim, e)) {
        rc = qs_npy_writer_put(&w, x, n, e) ? -1 : qs_npy_writer_close(&w, e);
        if (rc) qs_npy_writer_abort(&w);
    }
    free(x);
    free(qw);
    return rc;
}

static int quant_db(qs_cli *cli, qs_apply *a, const quant_imat *qi, const char *name, const char *outname, int json)
{
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_err e = {{0}};
    qs_tensor_rec t;
    int rc = QS_EXIT_ERR;
    char *opts = NULL, *meta = NULL, *defname = NULL, *src = NULL;
    char tmp[1024] = "";
    json_t *rep = json_array();
    if (qs_tensor_get(db, name, &t, &e)) { qs_cli_err(1, &e); qs_db_close(db); json_decref(rep); return rc; }
    /* the values go through a temporary .npy imported like a file (same hashing and statistics) */
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/qscope-quant-%ld-XXXXXX.npy", dir && *dir ? dir : "/tmp", (long)getpid());
    int tfd = mkstemps(tmp, 4);
    if (tfd < 0) { qs_cli_error(1, "%s: %s", tmp, strerror(errno)); tmp[0] = 0; goto done; }
    close(tfd);
    qs_treader *r = qs_treader_open(db, &t, &e);
    if (!r || (qi->m ? quant_imat_npy(a, qi, name, r, t.shape, t.ndim, tmp, &e) : quant_to_npy(a, r, t.shape, t.ndim, tmp, &e))) {
        qs_treader_close(r);
        qs_cli_err(1, &e);
        goto done;
    }
    /* the bytes quantized must be those of t.hash, and the reader's snapshot must end before writing */
    int bad = qs_treader_verify(r, &e);
    qs_treader_close(r);
    if (bad) { qs_cli_err(1, &e); goto done; }
    /* names and source paths whole: a cut one could merge two results into one row */
    if (!outname) {
        if ((qi->m ? asprintf(&defname, "%s@%s:imatrix@%.8s", name, a->f->name, qi->hash) : asprintf(&defname, "%s@%s", name, a->f->name)) < 0) {
            defname = NULL;
            qs_cli_error(1, "out of memory");
            goto done;
        }
        outname = defname;
    }
    opts = qs_quant_opts_json(a);
    if (qi->m) {   /* the importance matrix's hash beside the format's options */
        json_t *oj = json_loads(opts, 0, NULL);
        if (json_is_object(oj)) json_object_set_new(oj, "imatrix", json_string(qi->hash));
        char *o2 = oj ? json_dumps(oj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(oj);
        if (o2) { free(opts); opts = o2; }
    }
    json_t *m = json_pack("{s:o,s:s,s:o,s:s}", "quantized_from", qs_json_text(name), "input_hash", t.hash, "options",
                          json_loads(opts, 0, NULL), "tool_version", QS_VERSION);
    meta = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(m);
    if (asprintf(&src, "quant:%s", outname) < 0) { src = NULL; qs_cli_error(1, "out of memory"); goto done; }
    qs_import_opts io = {.copy = 1, .exact_name = outname, .jobs = 2, .source_path = src, .source_kind = "quantized",
                         .source_meta = meta};
    if (qs_db_begin(db, &e) || qs_import_file(db, tmp, &io, rep, &e) || qs_db_commit(db, &e)) {
        qs_db_rollback(db);
        qs_cli_err(1, &e);
        goto done;
    }
    if (json) { char *s = json_dumps(rep, JSON_INDENT(2)); puts(s); free(s); }
    else printf("%s %s  (%s of %s)\n", json_string_value(json_object_get(json_array_get(rep, 0), "status")), qs_esc(outname),
                opts, qs_esc(name));
    rc = QS_EXIT_OK;
done:
    if (tmp[0]) unlink(tmp);
    qs_tensor_rec_free(&t);
    free(opts); free(meta); free(defname); free(src);
    json_decref(rep);
    qs_db_close(db);
    return rc;
}

int qs_cmd_quant(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {QS_QUANT_LONGOPTS, {"codes", no_argument, 0, 'C'}, {"output", required_argument, 0, 'o'},
                                       {"name", required_argument, 0, 'N'}, {"json", no_argument, 0, 'J'}, {0, 0, 0, 0}};
    qs_apply a;
    memset(&a, 0, sizeof a);
    a.axis = 1;
    int codes = 0, json = 0, ch;
    const char *out = NULL, *outname = NULL;
    optind = 1;
    opterr = 0;
    quant_imat qi = {0};
    char fspec[1024];
    while ((ch = getopt_long(argc, argv, "f:o:", lo, NULL)) != -1) {
        if (ch == 'f' && strstr(optarg, ":imatrix=") && strlen(optarg) < sizeof fspec) {
            snprintf(fspec, sizeof fspec, "%s", optarg);
            qi.path = qs_imatrix_opt_split(fspec);
            optarg = fspec;
        }
        int k = qs_quant_opt("quant", ch, optarg, &a);
        if (k < 0) return QS_EXIT_USAGE;
        if (k) continue;
        switch (ch) {
        case 'C': codes = 1; break;
        case 'o': out = optarg; break;
        case 'N': outname = optarg; break;
        case 'J': json = 1; break;
        default: return qs_cli_usage("quant", "unknown option '%s'", argv[optind - 1]);
        }
    }
    int rc = qs_quant_opts_done("quant", &a);
    if (rc) return rc;
    if (qi.path) {
        if (optind == argc || argc - optind != 1 || access(argv[optind], F_OK) == 0)
            return qs_cli_usage("quant", "-f F:imatrix=FILE needs a stored tensor: its name picks the importance matrix's entry");
        if (a.axis != 1 || a.gran != QS_GRAN_BLOCK || a.cscale)
            return qs_cli_usage("quant", "-f F:imatrix=FILE: importances go with blocks along the rows (axis 1)");
        if ((rc = qs_imatrix_opt_load("quant", "-f ", qi.path, a.f, &qi.m, qi.hash))) return rc;
        rc = quant_db(cli, &a, &qi, argv[optind], outname, json);
        qs_imatrix_free(qi.m);
        free(qi.m);
        return rc;
    }
    if (optind == argc) {
        if (out || outname) return qs_cli_usage("quant", "-o and --name need an input file or tensor");
        return quant_stdin(&a, codes);
    }
    if (argc - optind != 1) return qs_cli_usage("quant", "give one input (a file or a tensor name)");
    if (codes) return qs_cli_usage("quant", "--codes works on numbers read from stdin");
    const char *in = argv[optind];
    struct stat st;
    if (stat(in, &st) == 0 && S_ISREG(st.st_mode)) {
        if (!out) return qs_cli_usage("quant", "give -o OUT.npy for a file input");
        return quant_file(&a, in, out);
    }
    if (out) return qs_cli_usage("quant", "'%s' is not a file; for a database tensor use --name OUT", in);
    return quant_db(cli, &a, &qi, in, outname, json);
}
