/*
** Shared CLI helpers: errors, colour, number formatting (see cli.h).
*/
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "par.h"
#include "../../store/db_readonly.h"
#include "../../store/text_escape.h"

/* Messages carry names from files and users: escape the whole line. */
static void vput_escaped(FILE *f, const char *fmt, va_list ap)
{
    char buf[2048];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) return;
    fputs(qs_esc(buf), f);
}

int qs_cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    if (qs_par_rank() > 0) {
        char msg[1024];
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (qs_par_hold_error(msg)) return code;
    }
    va_start(ap, fmt);
    fputs("qscope: ", stderr);
    vput_escaped(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int qs_cli_err(int code, const qs_err *e) { return qs_cli_error(code, "%s", e->msg); }

int qs_cli_usage(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (qs_par_hold_error(msg)) return QS_EXIT_USAGE;
    /* one hint per line: a message that already points somewhere keeps its own */
    if (strstr(msg, "(see ")) fprintf(stderr, "qscope %s: %s\n", cmd, qs_esc(msg));
    else fprintf(stderr, "qscope %s: %s (see `qscope help %s`)\n", cmd, qs_esc(msg), cmd);
    return QS_EXIT_USAGE;
}

qs_db *qs_cli_open_db(qs_cli *cli)
{
    qs_err e = {{0}};
    /* under mpirun rank 0 alone writes: it opens (and migrates) first, the others then read only */
    qs_db *db = NULL;
    if (qs_par_rank() == 0 && !(db = qs_db_open(cli->db_path, &e))) return qs_cli_err(QS_EXIT_ERR, &e), NULL;
    qs_par_barrier();
    if (qs_par_rank() > 0 && !(db = qs_db_open_readonly(cli->db_path, &e))) qs_cli_err(QS_EXIT_ERR, &e);
    return db;
}


int qs_text_cols(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

void qs_put_text(FILE *f, const char *s, size_t n)
{
    size_t need = qs_escape_buf(s, n, QS_ESC_TEXT, NULL, 0) + 1;
    char *buf = malloc(need);
    if (!buf) { fputs("?", f); return; }
    qs_escape_buf(s, n, QS_ESC_TEXT, buf, need);
    fputs(buf, f);
    free(buf);
}

void qs_csv_field(FILE *f, const char *s)
{
    const char *t = qs_esc(s);
    if (!strpbrk(t, ",\"")) { fputs(t, f); return; }
    fputc('"', f);
    for (; *t; t++) {
        if (*t == '"') fputc('"', f);
        fputc(*t, f);
    }
    fputc('"', f);
}

const char *qs_c_bold(const qs_cli *c) { return c->color ? "\033[1m" : ""; }
const char *qs_c_dim(const qs_cli *c) { return c->color ? "\033[2m" : ""; }
const char *qs_c_head(const qs_cli *c) { return c->color ? "\033[1;36m" : ""; }
const char *qs_c_warn(const qs_cli *c) { return c->color ? "\033[33m" : ""; }
const char *qs_c_off(const qs_cli *c) { return c->color ? "\033[0m" : ""; }

void qs_fmt_bytes(double n, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (n >= 1024 && i < 4) { n /= 1024; i++; }
    if (i == 0) snprintf(buf, cap, "%.0f B", n);
    else snprintf(buf, cap, "%.1f %s", n, u[i]);
}

void qs_fmt_num(double x, int sig, char *buf, size_t cap)
{
    if (isnan(x)) snprintf(buf, cap, "nan");
    else if (isinf(x)) snprintf(buf, cap, x > 0 ? "inf" : "-inf");
    else snprintf(buf, cap, "%.*g", sig, x);
}

int qs_parse_u64(const char *s, unsigned long long *out)
{
    if (!s || !*s || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int qs_parse_f64(const char *s, double *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int qs_cli_tempdir(const char *tag, char *out, size_t cap)
{
    const char *t = getenv("TMPDIR");
    int n = snprintf(out, cap, "%s/qscope-%s-XXXXXX", t && *t ? t : "/tmp", tag);
    return n > 0 && (size_t)n < cap && mkdtemp(out) ? 0 : -1;
}

int qs_cli_parse_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out)
{
    unsigned long long v;
    if (qs_parse_u64(s, &v) || v < (unsigned long long)lo || v > (unsigned long long)hi)
        return qs_cli_usage(cmd, "%s wants an integer in %d..%d, not '%s'", opt, lo, hi, s);
    *out = (int)v;
    return 0;
}
