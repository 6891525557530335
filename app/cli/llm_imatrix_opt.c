/*
** The weight-format option `:imatrix=FILE` of `llm eval --config w=F:imatrix=FILE` (and of `quant`):
** FILE is an importance matrix in either of llama.cpp's formats (store/imatrix.h), read once; each
** weight is then rounded with its entry as llama-quantize --imatrix rounds it
** (analysis/llm_imatrix.h).  The option comes last in the spec (the file name may hold ':').
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llm_imatrix_opt.h"
#include "../../kernels/format_imatrix.h"
#include "../../store/text_escape.h"

#define KEY ":imatrix="

char *qs_imatrix_opt_split(char *spec)
{
    char *p = strstr(spec, KEY);
    if (!p) return NULL;
    *p = 0;
    return p + strlen(KEY);
}

int qs_imatrix_opt_load(const char *cmd, const char *what, const char *path, const qs_format *f, qs_imatrix **out,
                        char hash[33])
{
    if (!*path) return qs_cli_usage(cmd, "%s: imatrix= needs a FILE", what);
    if (!qs_format_takes_imatrix(f))
        return qs_cli_usage(cmd, "%s: %s takes no importance matrix (llama.cpp's types with one: q4_0, q4_1, q5_0, q5_1, "
                            "q2_k..q6_k, iq4_nl, iq4_xs; ggml's q8_0 ignores it)", what, f->name);
    qs_imatrix *m = calloc(1, sizeof *m);
    qs_err e = {{0}};
    if (!m) return qs_cli_error(QS_EXIT_ERR, "out of memory");
    if (qs_imatrix_read(path, m, hash, &e)) { free(m); return qs_cli_err(QS_EXIT_ERR, &e); }
    *out = m;
    return 0;
}

void qs_imatrix_opt_label(const char *path, const char *hash, char *buf, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t k = strlen(buf);
    if (k < cap) snprintf(buf + k, cap - k, ":imatrix=%.40s@%.8s", base, hash);
}

int qs_imatrix_opt_config(const char *cmd, const char *opt, const char *path, qs_eval_cfg *c, char *lab, size_t cap)
{
    char what[64];
    snprintf(what, sizeof what, "%s: w=", opt);
    int rc = qs_imatrix_opt_load(cmd, what, path, c->w.f, &c->imat, c->imat_hash);
    if (!rc) qs_imatrix_opt_label(path, c->imat_hash, lab, cap);
    return rc;
}

void qs_imatrix_opt_notes(const char *cmd, const qs_eval_cfg *cfg, int n)
{
    for (int i = 0; i < n; i++) {
        const qs_imat_use *u = &cfg[i].imat_use;
        if (cfg[i].imat && u->missing)
            fprintf(stderr, "qscope: %s: note: %s: the importance matrix has no entry for %d weight%s (%s%s): rounded "
                    "without importances, as llama-quantize does\n", cmd, cfg[i].label, u->missing, u->missing > 1 ? "s" : "",
                    qs_esc(u->first_missing), u->missing > 1 ? ", ..." : "");
    }
}
