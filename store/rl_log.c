/*
** mmlog v1 parser: CSV (one row per token) and JSONL (one line per sequence).  See rl_log.h.
*/
#include "rl_log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- numbers ------------------------------------------------------------------------------- */

static const double kPow10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int lower_eq(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(end - p) < n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != w[i]) return 0;
    }
    return 1;
}

int qs_rl_scan_double(const char *p, const char *end, double *out, const char **next)
{
    const char *s = p;
    int neg = 0;
    if (s < end && (*s == '-' || *s == '+')) { neg = *s == '-'; s++; }
    /* non-finite spellings (Python's json writes NaN / Infinity / -Infinity) */
    if (s < end && (*s == 'n' || *s == 'N' || *s == 'i' || *s == 'I')) {
        if (lower_eq(s, end, "nan")) { *out = NAN; *next = s + 3; return 1; }
        if (lower_eq(s, end, "infinity")) { *out = neg ? -INFINITY : INFINITY; *next = s + 8; return 1; }
        if (lower_eq(s, end, "inf")) { *out = neg ? -INFINITY : INFINITY; *next = s + 3; return 1; }
        return -1;
    }
    uint64_t m = 0;
    int sig = 0, drop = 0, digits = 0;
    long exp10 = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        digits++;
        if (m == 0 && *s == '0') { s++; continue; }
        if (sig < 19) { m = m * 10 + (uint64_t)(*s - '0'); sig++; } else { drop++; }
        s++;
    }
    exp10 += drop;
    if (s < end && *s == '.') {
        s++;
        while (s < end && *s >= '0' && *s <= '9') {
            digits++;
            if (m == 0 && *s == '0') { exp10--; s++; continue; }
            if (sig < 19) { m = m * 10 + (uint64_t)(*s - '0'); sig++; exp10--; } else { drop++; }
            s++;
        }
    }
    if (!digits) return -1;
    if (s < end && (*s == 'e' || *s == 'E')) {
        const char *q = s + 1;
        int eneg = 0;
        if (q < end && (*q == '-' || *q == '+')) { eneg = *q == '-'; q++; }
        if (q >= end || *q < '0' || *q > '9') return -1;
        long ev = 0;
        while (q < end && *q >= '0' && *q <= '9') { if (ev < 100000) ev = ev * 10 + (*q - '0'); q++; }
        exp10 += eneg ? -ev : ev;
        s = q;
    }
    *next = s;
    if (m == 0) { *out = neg ? -0.0 : 0.0; return 0; }
    if (!drop && m < (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        /* exact: m and 10^|e| are exact doubles, one correctly rounded operation */
        double v = (double)m;
        v = exp10 < 0 ? v / kPow10[-exp10] : v * kPow10[exp10];
        *out = neg ? -v : v;
        return 0;
    }
    char buf[128];
    size_t len = (size_t)(s - p);
    if (len >= sizeof buf) {
        char *big = malloc(len + 1);
        if (!big) return -1;
        memcpy(big, p, len);
        big[len] = 0;
        *out = strtod(big, NULL);
        free(big);
    } else {
        memcpy(buf, p, len);
        buf[len] = 0;
        *out = strtod(buf, NULL);
    }
    return isfinite(*out) ? 0 : 1;
}

/* integer >= 0 (also "12.0"-free: digits only, optional leading '+') */
static int scan_int(const char *p, const char *end, int64_t *out, const char **next)
{
    const char *s = p;
    int neg = 0;
    if (s < end && (*s == '-' || *s == '+')) { neg = *s == '-'; s++; }
    if (s >= end || *s < '0' || *s > '9') return -1;
    int64_t v = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (v > (INT64_MAX - 9) / 10) return -2;
        v = v * 10 + (*s - '0');
        s++;
    }
    if (s < end && (*s == '.' || *s == 'e' || *s == 'E')) return -3;
    *out = neg ? -v : v;
    *next = s;
    return 0;
}

/* ---- a string -> int64 hash map (keys copied) ----------------------------------------------- */

typedef struct hent { char *key; uint32_t len; uint64_t h; int64_t val; } hent;
typedef struct hmap { hent *t; size_t cap, n; } hmap;

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h ^ (h >> 29);
}

static void hmap_free(hmap *m)
{
    for (size_t i = 0; i < m->cap; i++) free(m->t[i].key);
    free(m->t);
    memset(m, 0, sizeof *m);
}

/* find key; if absent and ins: insert with *val (returns 0 inserted), else returns 1 found (*val set);
** -1 on out of memory */
static int hmap_get(hmap *m, const char *key, size_t len, int64_t *val, int ins)
{
    if (ins && (m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        hent *nt = calloc(nc, sizeof *nt);
        if (!nt) return -1;
        for (size_t i = 0; i < m->cap; i++)
            if (m->t[i].key) {
                size_t j = m->t[i].h & (nc - 1);
                while (nt[j].key) j = (j + 1) & (nc - 1);
                nt[j] = m->t[i];
            }
        free(m->t);
        m->t = nt;
        m->cap = nc;
    }
    if (!m->cap) return 2;
    uint64_t h = hash_bytes(key, len);
    size_t j = h & (m->cap - 1);
    while (m->t[j].key) {
        if (m->t[j].h == h && m->t[j].len == len && !memcmp(m->t[j].key, key, len)) { *val = m->t[j].val; return 1; }
        j = (j + 1) & (m->cap - 1);
    }
    if (!ins) return 2;
    char *k = malloc(len + 1);
    if (!k) return -1;
    memcpy(k, key, len);
    k[len] = 0;
    m->t[j] = (hent){k, (uint32_t)len, h, *val};
    m->n++;
    return 0;
}

/* ---- parser state ----------------------------------------------------------------------------- */

#define BATCH 8192

typedef struct pstate {
    const qs_rl_sink *sink;
    qs_rl_parse_info *info;
    qs_err *e;
    uint64_t line;
    hmap seqs;            /* "step\x1fseq_id" -> ordinal */
    hmap stepn;           /* step (8 bytes) -> number of sequences so far */
    hmap groups;          /* group_id -> ordinal */
    qs_rl_row *buf;
    size_t nbuf;
    char *key;            /* scratch for map keys */
    size_t keycap;
    /* CSV: the sequence being read */
    int have_cur;
    int64_t cur_step, cur_seq, cur_pos, cur_grp;
    double cur_reward;
    char *cur_id;
    size_t cur_idlen, cur_idcap;
} pstate;

static int perr(pstate *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(pstate *s, const char *fmt, ...)
{
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qs_fail(s->e, "line %llu: %s", (unsigned long long)s->line, msg);
}

static int flush(pstate *s)
{
    if (!s->nbuf) return 0;
    int rc = 0;
    if (s->sink && s->sink->rows) rc = s->sink->rows(s->sink->ctx, s->buf, s->nbuf, s->e);
    s->nbuf = 0;
    return rc;
}

static int push(pstate *s, const qs_rl_row *r)
{
    s->buf[s->nbuf++] = *r;
    s->info->tokens++;
    double d = r->lp_train - r->lp_rollout;
    if (fabs(d) > 20) {
        if (!s->info->n_far) s->info->far_line = s->line;
        s->info->n_far++;
    }
    return s->nbuf == BATCH ? flush(s) : 0;
}

static int ensure_key(pstate *s, size_t n)
{
    if (n <= s->keycap) return 0;
    size_t c = s->keycap ? s->keycap : 256;
    while (c < n) c *= 2;
    char *k = realloc(s->key, c);
    if (!k) return qs_fail(s->e, "out of memory");
    s->key = k;
    s->keycap = c;
    return 0;
}

/* Printable form of an id for messages (truncated, control characters replaced). */
static void show_id(const char *id, size_t len, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; i < len && j + 4 < cap; i++) out[j++] = (unsigned char)id[i] < 0x20 ? '?' : id[i];
    if (len > 0 && j + 4 >= cap) { out[j++] = '.'; out[j++] = '.'; out[j++] = '.'; }
    out[j] = 0;
}

/* Register a new sequence (step, seq_id); fails if seen before.  Sets *ord and *grp. */
static int new_seq(pstate *s, int64_t step, const char *id, size_t idlen, const char *gid, size_t glen, int has_g,
                   int64_t *ord, int64_t *grp)
{
    for (size_t i = 0; i < idlen; i++)
        if ((unsigned char)id[i] < 0x20) return perr(s, "seq_id contains a control character");
    for (size_t i = 0; has_g && i < glen; i++)
        if ((unsigned char)gid[i] < 0x20) return perr(s, "group_id contains a control character");
    if (ensure_key(s, idlen + 9)) return -1;
    memcpy(s->key, &step, 8);
    s->key[8] = 0x1f;
    memcpy(s->key + 9, id, idlen);
    int64_t v;
    int rc = hmap_get(&s->seqs, s->key, idlen + 9, &v, 0);
    if (rc == 1) {
        char b[80];
        show_id(id, idlen, b, sizeof b);
        return perr(s, "duplicate sequence: seq_id '%s' of step %lld was already given (rows of a sequence must be contiguous)",
                    b, (long long)step);
    }
    int64_t n = 0;
    rc = hmap_get(&s->stepn, (const char *)&step, 8, &n, 1);
    if (rc < 0) return qs_fail(s->e, "out of memory");
    if (rc == 0) s->info->steps++;
    v = n;
    if (hmap_get(&s->seqs, s->key, idlen + 9, &v, 1) < 0) return qs_fail(s->e, "out of memory");
    /* bump the step's count */
    for (size_t j = hash_bytes(&step, 8) & (s->stepn.cap - 1);; j = (j + 1) & (s->stepn.cap - 1))
        if (s->stepn.t[j].len == 8 && !memcmp(s->stepn.t[j].key, &step, 8)) { s->stepn.t[j].val++; break; }
    *ord = n;
    *grp = -1;
    char gbuf[1];
    if (has_g && glen > 0) {
        int64_t g = (int64_t)s->groups.n;
        rc = hmap_get(&s->groups, gid, glen, &g, 1);
        if (rc < 0) return qs_fail(s->e, "out of memory");
        if (rc == 0) s->info->groups++;
        *grp = g;
    }
    s->info->seqs++;
    if (s->sink && s->sink->seq) {
        /* NUL-terminated copies for the sink */
        char *idz = malloc(idlen + 1), *gz = has_g && glen ? malloc(glen + 1) : gbuf;
        if (!idz || !gz) { free(idz); if (gz != gbuf) free(gz); return qs_fail(s->e, "out of memory"); }
        memcpy(idz, id, idlen);
        idz[idlen] = 0;
        if (gz != gbuf) { memcpy(gz, gid, glen); gz[glen] = 0; }
        int r = s->sink->seq(s->sink->ctx, step, n, idz, gz != gbuf ? gz : NULL, s->e);
        free(idz);
        if (gz != gbuf) free(gz);
        if (r) return r;
    }
    return 0;
}

static int check_lp(pstate *s, const char *name, double v, int rc, size_t idx, int arr)
{
    char where[48] = "";
    if (arr) snprintf(where, sizeof where, "[%zu]", idx);
    if (rc == 1 || !isfinite(v)) return perr(s, "%s%s is %s (log-probs must be finite)", name, where, isnan(v) ? "NaN" : "infinite");
    if (v > QS_RL_LP_TOL) return perr(s, "%s%s = %.9g is positive (a log-probability must be <= 0)", name, where, v);
    return 0;
}

/* ---- CSV ---------------------------------------------------------------------------------- */

enum { C_STEP, C_SEQ, C_GROUP, C_TOK, C_LPR, C_LPT, C_ADV, C_REW, C_ENT, C_MASK, C_TOKID, C_NCOL };
static const char *const kCsvNames[C_NCOL] = {"step", "seq_id", "group_id", "tok_idx", "lp_rollout", "lp_train",
                                              "adv", "reward", "entropy", "mask", "token_id"};

typedef struct span { const char *p; size_t n; } span;

static void trim_field(span *f)
{
    while (f->n && (f->p[0] == ' ' || f->p[0] == '\t')) { f->p++; f->n--; }
    while (f->n && (f->p[f->n - 1] == ' ' || f->p[f->n - 1] == '\t')) f->n--;
    if (f->n >= 2 && f->p[0] == '"' && f->p[f->n - 1] == '"') { f->p++; f->n -= 2; }
}

static int csv_num(pstate *s, span f, const char *name, double *v, int *rc_out)
{
    const char *next;
    int rc = qs_rl_scan_double(f.p, f.p + f.n, v, &next);
    if (rc < 0 || next != f.p + f.n) {
        char b[40];
        show_id(f.p, f.n, b, sizeof b);
        return perr(s, "%s '%s' is not a number", name, b);
    }
    *rc_out = rc;
    return 0;
}

static int csv_int(pstate *s, span f, const char *name, int64_t *v)
{
    const char *next;
    int rc = scan_int(f.p, f.p + f.n, v, &next);
    if (rc || next != f.p + f.n || *v < 0) {
        char b[40];
        show_id(f.p, f.n, b, sizeof b);
        return perr(s, "%s '%s' is not a non-negative integer", name, b);
    }
    return 0;
}

static int parse_csv(pstate *s, const char *p, const char *end)
{
    int col[64];            /* header column -> C_* or -1 */
    int ncol = 0, where[C_NCOL];
    for (int i = 0; i < C_NCOL; i++) where[i] = -1;
    int first = 1;
    span fld[64];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        s->line++;
        if (!nl) {
            if ((size_t)(end - p) > QS_RL_MAX_LINE) return perr(s, "line longer than %u MiB", QS_RL_MAX_LINE >> 20);
            return perr(s, "truncated last line (no newline at the end of the file)");
        }
        if ((size_t)(nl - p) > QS_RL_MAX_LINE) return perr(s, "line longer than %u MiB", QS_RL_MAX_LINE >> 20);
        const char *le = nl;
        if (le > p && le[-1] == '\r') le--;
        const char *ls = p;
        p = nl + 1;
        if (le == ls) continue;                    /* blank line */
        int nf = 0;
        for (const char *q = ls;;) {
            const char *c = memchr(q, ',', (size_t)(le - q));
            if (nf == 64) return perr(s, "more than 64 fields");
            fld[nf].p = q;
            fld[nf].n = (size_t)((c ? c : le) - q);
            trim_field(&fld[nf]);
            nf++;
            if (!c) break;
            q = c + 1;
        }
        if (first) {
            first = 0;
            ncol = nf;
            for (int i = 0; i < nf; i++) {
                col[i] = -1;
                for (int k = 0; k < C_NCOL; k++)
                    if (fld[i].n == strlen(kCsvNames[k]) && !memcmp(fld[i].p, kCsvNames[k], fld[i].n)) col[i] = k;
                /* the other common spelling of the schema's names */
                if (col[i] < 0 && fld[i].n == 3 && !memcmp(fld[i].p, "seq", 3)) col[i] = C_SEQ;
                if (col[i] < 0) {
                    for (int j = 0; j < i; j++)
                        if (fld[j].n == fld[i].n && !memcmp(fld[j].p, fld[i].p, fld[i].n)) {
                            char b[40];
                            show_id(fld[i].p, fld[i].n, b, sizeof b);
                            return perr(s, "duplicate column '%s' in the header", b);
                        }
                    continue;
                }
                if (where[col[i]] >= 0) return perr(s, "duplicate column '%s' in the header", kCsvNames[col[i]]);
                where[col[i]] = i;
            }
            static const int req[] = {C_STEP, C_SEQ, C_TOK, C_LPR, C_LPT};
            for (size_t k = 0; k < sizeof req / sizeof req[0]; k++)
                if (where[req[k]] < 0)
                    return perr(s, "header has no '%s' column (mmlog v1 needs step, seq_id, tok_idx, lp_rollout, lp_train)",
                                kCsvNames[req[k]]);
            continue;
        }
        if (nf != ncol) {
            if (p >= end && nf < ncol) return perr(s, "truncated last line: %d of %d fields", nf, ncol);
            return perr(s, "%d fields where the header has %d", nf, ncol);
        }
        qs_rl_row r;
        int rc;
        if (csv_int(s, fld[where[C_STEP]], "step", &r.step)) return -1;
        if (csv_int(s, fld[where[C_TOK]], "tok_idx", &r.pos)) return -1;
        span sid = fld[where[C_SEQ]];
        if (!sid.n) return perr(s, "seq_id is empty");
        if (csv_num(s, fld[where[C_LPR]], "lp_rollout", &r.lp_rollout, &rc) || check_lp(s, "lp_rollout", r.lp_rollout, rc, 0, 0))
            return -1;
        if (csv_num(s, fld[where[C_LPT]], "lp_train", &r.lp_train, &rc) || check_lp(s, "lp_train", r.lp_train, rc, 0, 0))
            return -1;
        r.adv = r.reward = r.entropy = NAN;
        r.token_id = -1;
        r.mask = 1;
        if (where[C_ADV] >= 0 && fld[where[C_ADV]].n) {
            if (csv_num(s, fld[where[C_ADV]], "adv", &r.adv, &rc)) return -1;
            if (rc) return perr(s, "adv is not finite");
        }
        if (where[C_REW] >= 0 && fld[where[C_REW]].n) {
            if (csv_num(s, fld[where[C_REW]], "reward", &r.reward, &rc)) return -1;
            if (rc) return perr(s, "reward is not finite");
        }
        if (where[C_ENT] >= 0 && fld[where[C_ENT]].n) {
            if (csv_num(s, fld[where[C_ENT]], "entropy", &r.entropy, &rc)) return -1;
            if (rc || r.entropy < 0) return perr(s, "entropy must be finite and >= 0");
        }
        if (where[C_MASK] >= 0 && fld[where[C_MASK]].n) {
            span m = fld[where[C_MASK]];
            if (m.n != 1 || (m.p[0] != '0' && m.p[0] != '1')) return perr(s, "mask must be 0 or 1");
            r.mask = m.p[0] - '0';
        }
        if (where[C_TOKID] >= 0 && fld[where[C_TOKID]].n && csv_int(s, fld[where[C_TOKID]], "token_id", &r.token_id))
            return -1;
        /* same sequence as the previous row? */
        int same = s->have_cur && s->cur_step == r.step && s->cur_idlen == sid.n && !memcmp(s->cur_id, sid.p, sid.n);
        if (same) {
            if (r.pos == s->cur_pos)
                return perr(s, "duplicate token: tok_idx %lld of sequence '%.*s' (step %lld) was already given",
                            (long long)r.pos, (int)(sid.n > 60 ? 60 : sid.n), sid.p, (long long)r.step);
            if (r.pos < s->cur_pos)
                return perr(s, "tok_idx %lld after %lld: tokens of a sequence must come in increasing order",
                            (long long)r.pos, (long long)s->cur_pos);
            if (isnan(r.reward)) r.reward = s->cur_reward;
        } else {
            span g = where[C_GROUP] >= 0 ? fld[where[C_GROUP]] : (span){NULL, 0};
            int64_t ord, grp;
            if (new_seq(s, r.step, sid.p, sid.n, g.p, g.n, where[C_GROUP] >= 0, &ord, &grp)) return -1;
            if (sid.n > s->cur_idcap) {
                char *c = realloc(s->cur_id, sid.n);
                if (!c) return qs_fail(s->e, "out of memory");
                s->cur_id = c;
                s->cur_idcap = sid.n;
            }
            memcpy(s->cur_id, sid.p, sid.n);
            s->cur_idlen = sid.n;
            s->have_cur = 1;
            s->cur_step = r.step;
            s->cur_seq = ord;
            s->cur_grp = grp;
            s->cur_reward = r.reward;
        }
        s->cur_pos = r.pos;
        r.seq = s->cur_seq;
        r.grp = s->cur_grp;
        if (push(s, &r)) return -1;
    }
    if (first) return qs_fail(s->e, "line 1: empty file (no header)");
    return 0;
}

/* ---- JSONL -------------------------------------------------------------------------------- */

typedef struct jp { const char *p, *end; pstate *s; } jp;

static void jws(jp *j) { while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r')) j->p++; }

/* A JSON string: sets the raw span (between quotes); *esc = 1 if it has escapes. */
static int jstring(jp *j, span *out, int *esc)
{
    if (j->p >= j->end || *j->p != '"') return perr(j->s, "expected a string");
    const char *q = ++j->p;
    *esc = 0;
    while (q < j->end && *q != '"') {
        if (*q == '\\') {
            *esc = 1;
            q++;
            if (q >= j->end) break;
        } else if ((unsigned char)*q < 0x20) {
            return perr(j->s, "control character inside a string");
        }
        q++;
    }
    if (q >= j->end) return perr(j->s, "unterminated string");
    out->p = j->p;
    out->n = (size_t)(q - j->p);
    j->p = q + 1;
    return 0;
}

static int jskip(jp *j, int depth);

static int jskip_container(jp *j, int depth, char open, char close)
{
    if (depth > 64) return perr(j->s, "JSON nested too deeply");
    j->p++;
    jws(j);
    if (j->p < j->end && *j->p == close) { j->p++; return 0; }
    for (;;) {
        jws(j);
        if (open == '{') {
            span k;
            int esc;
            if (jstring(j, &k, &esc)) return -1;
            jws(j);
            if (j->p >= j->end || *j->p != ':') return perr(j->s, "expected ':' in an object");
            j->p++;
            jws(j);
        }
        if (jskip(j, depth + 1)) return -1;
        jws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == close) { j->p++; return 0; }
        return perr(j->s, "expected ',' or '%c'", close);
    }
}

static int jskip(jp *j, int depth)
{
    jws(j);
    if (j->p >= j->end) return perr(j->s, "unexpected end of line (value missing)");
    char c = *j->p;
    if (c == '"') { span sp; int esc; return jstring(j, &sp, &esc); }
    if (c == '{') return jskip_container(j, depth, '{', '}');
    if (c == '[') return jskip_container(j, depth, '[', ']');
    if (lower_eq(j->p, j->end, "true") && j->p[0] == 't') { j->p += 4; return 0; }
    if (lower_eq(j->p, j->end, "false") && j->p[0] == 'f') { j->p += 5; return 0; }
    if (lower_eq(j->p, j->end, "null") && j->p[0] == 'n') { j->p += 4; return 0; }
    double v;
    const char *nx;
    if (qs_rl_scan_double(j->p, j->end, &v, &nx) < 0) return perr(j->s, "invalid JSON value");
    j->p = nx;
    return 0;
}

static int jnull(jp *j)
{
    if (j->end - j->p >= 4 && !memcmp(j->p, "null", 4)) { j->p += 4; return 1; }
    return 0;
}

/* growable arrays of a line */
typedef struct darr { double *v; size_t n, cap; } darr;

static int darr_push(darr *a, double x)
{
    if (a->n == a->cap) {
        size_t c = a->cap ? a->cap * 2 : 256;
        double *v = realloc(a->v, c * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = c;
    }
    a->v[a->n++] = x;
    return 0;
}

enum { AK_NUM, AK_LP, AK_INT01, AK_INT };

/* An array of numbers (kind: AK_LP checks log-probs; AK_INT01 mask values; AK_INT token ids;
** null entries become NaN except for log-probs). */
static int jarray(jp *j, const char *name, int kind, darr *a)
{
    a->n = 0;
    jws(j);
    if (j->p >= j->end || *j->p != '[') return perr(j->s, "%s must be an array", name);
    j->p++;
    jws(j);
    if (j->p < j->end && *j->p == ']') { j->p++; return 0; }
    for (;;) {
        jws(j);
        double v;
        const char *nx;
        if (kind != AK_LP && jnull(j)) {
            v = NAN;
        } else if (kind == AK_INT01 && j->end - j->p >= 4 && !memcmp(j->p, "true", 4)) {
            v = 1; j->p += 4;
        } else if (kind == AK_INT01 && j->end - j->p >= 5 && !memcmp(j->p, "false", 5)) {
            v = 0; j->p += 5;
        } else {
            int rc = qs_rl_scan_double(j->p, j->end, &v, &nx);
            if (rc < 0) return perr(j->s, "%s[%zu] is not a number", name, a->n);
            j->p = nx;
            if (kind == AK_LP) { if (check_lp(j->s, name, v, rc, a->n, 1)) return -1; }
            else if (rc) return perr(j->s, "%s[%zu] is not finite", name, a->n);
            if (kind == AK_INT01 && v != 0 && v != 1) return perr(j->s, "%s[%zu] must be 0 or 1", name, a->n);
            if (kind == AK_INT && (v < 0 || v != floor(v) || v > 9e15)) return perr(j->s, "%s[%zu] is not a non-negative integer", name, a->n);
        }
        if (darr_push(a, v)) return qs_fail(j->s->e, "out of memory");
        jws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == ']') { j->p++; return 0; }
        return perr(j->s, "expected ',' or ']' in %s", name);
    }
}

/* Decode a JSON string with escapes into a malloc'd buffer (UTF-8), or copy it. */
static char *jdecode(pstate *s, span sp, int esc, size_t *len)
{
    char *o = malloc(sp.n + 1);
    if (!o) { qs_fail(s->e, "out of memory"); return NULL; }
    if (!esc) { memcpy(o, sp.p, sp.n); o[sp.n] = 0; *len = sp.n; return o; }
    size_t k = 0;
    for (size_t i = 0; i < sp.n; i++) {
        char c = sp.p[i];
        if (c != '\\') { o[k++] = c; continue; }
        if (++i >= sp.n) break;
        c = sp.p[i];
        switch (c) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'u': {
            unsigned cp = 0;
            if (i + 4 >= sp.n) { free(o); perr(s, "bad \\u escape"); return NULL; }
            for (int d = 1; d <= 4; d++) {
                char h = sp.p[i + d];
                cp <<= 4;
                if (h >= '0' && h <= '9') cp |= (unsigned)(h - '0');
                else if (h >= 'a' && h <= 'f') cp |= (unsigned)(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F') cp |= (unsigned)(h - 'A' + 10);
                else { free(o); perr(s, "bad \\u escape"); return NULL; }
            }
            i += 4;
            /* BMP only (surrogates kept as their own code points); at most 3 bytes <= 6 escape bytes */
            if (cp < 0x80) o[k++] = (char)cp;
            else if (cp < 0x800) { o[k++] = (char)(0xC0 | (cp >> 6)); o[k++] = (char)(0x80 | (cp & 0x3F)); }
            else { o[k++] = (char)(0xE0 | (cp >> 12)); o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[k++] = (char)(0x80 | (cp & 0x3F)); }
            break;
        }
        default: o[k++] = c; break;
        }
    }
    o[k] = 0;
    *len = k;
    return o;
}

enum { K_STEP, K_SEQ, K_GROUP, K_REW, K_ADV, K_LPR, K_LPT, K_ENT, K_MASK, K_TOKID, K_N };
static const char *const kJsonKeys[K_N] = {"step", "seq_id", "group_id", "reward", "adv", "lp_rollout", "lp_train",
                                           "entropy", "mask", "token_ids"};

typedef struct jline {
    darr lpr, lpt, adv, ent, mask, tok;
    span keys[256];
} jline;

static int parse_json_line(pstate *s, jline *L, const char *ls, const char *le)
{
    jp j = {ls, le, s};
    jws(&j);
    if (j.p >= j.end || *j.p != '{') return perr(s, "expected a JSON object (one sequence per line)");
    j.p++;
    int have[K_N] = {0};
    int nkeys = 0;
    int64_t step = -1;
    span sid = {0}, gid = {0};
    int sid_esc = 0, gid_esc = 0, has_g = 0, adv_scalar = 0;
    char sid_num[32], gid_num[32];
    double reward = NAN, advs = NAN;
    jws(&j);
    if (j.p < j.end && *j.p == '}') return perr(s, "empty object");
    for (;;) {
        jws(&j);
        span k;
        int esc;
        if (jstring(&j, &k, &esc)) return -1;
        for (int i = 0; i < nkeys; i++)
            if (L->keys[i].n == k.n && !memcmp(L->keys[i].p, k.p, k.n))
                return perr(s, "duplicate key \"%.*s\"", (int)(k.n > 60 ? 60 : k.n), k.p);
        if (nkeys == 256) return perr(s, "more than 256 keys in one object");
        L->keys[nkeys++] = k;
        jws(&j);
        if (j.p >= j.end || *j.p != ':') return perr(s, "expected ':' after a key");
        j.p++;
        jws(&j);
        int key = -1;
        for (int i = 0; i < K_N; i++)
            if (k.n == strlen(kJsonKeys[i]) && !memcmp(k.p, kJsonKeys[i], k.n)) key = i;
        if (key < 0 && k.n == 8 && !memcmp(k.p, "token_id", 8)) key = K_TOKID;
        if (key < 0 && k.n == 3 && !memcmp(k.p, "seq", 3)) key = K_SEQ;
        if (key >= 0 && have[key]) return perr(s, "duplicate key \"%.*s\"", (int)k.n, k.p);
        if (key >= 0) have[key] = 1;
        const char *nx;
        double v;
        int rc;
        switch (key) {
        case K_STEP:
            if (scan_int(j.p, j.end, &step, &nx) || step < 0) return perr(s, "step is not a non-negative integer");
            j.p = nx;
            break;
        case K_SEQ:
        case K_GROUP: {
            span *sp = key == K_SEQ ? &sid : &gid;
            int *e2 = key == K_SEQ ? &sid_esc : &gid_esc;
            char *nb = key == K_SEQ ? sid_num : gid_num;
            if (key == K_GROUP) has_g = 1;
            if (j.p < j.end && *j.p == '"') { if (jstring(&j, sp, e2)) return -1; }
            else if (key == K_GROUP && jnull(&j)) { has_g = 0; }
            else {
                int64_t iv;
                if (scan_int(j.p, j.end, &iv, &nx)) return perr(s, "%s must be a string or an integer", kJsonKeys[key]);
                snprintf(nb, 32, "%lld", (long long)iv);
                sp->p = nb;
                sp->n = strlen(nb);
                j.p = nx;
            }
            break;
        }
        case K_REW:
            if (jnull(&j)) break;
            rc = qs_rl_scan_double(j.p, j.end, &v, &nx);
            if (rc) return perr(s, rc < 0 ? "reward is not a number" : "reward is not finite");
            reward = v;
            j.p = nx;
            break;
        case K_ADV:
            if (jnull(&j)) break;
            if (j.p < j.end && *j.p == '[') { if (jarray(&j, "adv", AK_NUM, &L->adv)) return -1; break; }
            rc = qs_rl_scan_double(j.p, j.end, &v, &nx);
            if (rc) return perr(s, rc < 0 ? "adv is not a number or an array" : "adv is not finite");
            advs = v;
            adv_scalar = 1;
            j.p = nx;
            break;
        case K_LPR: if (jarray(&j, "lp_rollout", AK_LP, &L->lpr)) return -1; break;
        case K_LPT: if (jarray(&j, "lp_train", AK_LP, &L->lpt)) return -1; break;
        case K_ENT: if (jarray(&j, "entropy", AK_NUM, &L->ent)) return -1; break;
        case K_MASK: if (jarray(&j, "mask", AK_INT01, &L->mask)) return -1; break;
        case K_TOKID: if (jarray(&j, "token_ids", AK_INT, &L->tok)) return -1; break;
        default: if (jskip(&j, 0)) return -1; break;
        }
        jws(&j);
        if (j.p < j.end && *j.p == ',') { j.p++; continue; }
        if (j.p < j.end && *j.p == '}') { j.p++; break; }
        return perr(s, j.p >= j.end ? "unexpected end of line (object not closed)" : "expected ',' or '}' after a value");
    }
    jws(&j);
    if (j.p != j.end) return perr(s, "unexpected text after the JSON object");
    if (!have[K_STEP]) return perr(s, "missing \"step\"");
    if (!have[K_SEQ]) return perr(s, "missing \"seq_id\"");
    if (!have[K_LPR]) return perr(s, "missing \"lp_rollout\"");
    if (!have[K_LPT]) return perr(s, "missing \"lp_train\"");
    size_t T = L->lpr.n;
    if (L->lpt.n != T) return perr(s, "lp_train has %zu entries, lp_rollout %zu", L->lpt.n, T);
    if (have[K_ADV] && !adv_scalar && L->adv.n != T && L->adv.n) return perr(s, "adv has %zu entries, lp_rollout %zu", L->adv.n, T);
    if (have[K_ENT] && L->ent.n != T) return perr(s, "entropy has %zu entries, lp_rollout %zu", L->ent.n, T);
    if (have[K_MASK] && L->mask.n != T) return perr(s, "mask has %zu entries, lp_rollout %zu", L->mask.n, T);
    if (have[K_TOKID] && L->tok.n != T) return perr(s, "token_ids has %zu entries, lp_rollout %zu", L->tok.n, T);
    for (size_t t = 0; have[K_ENT] && t < T; t++)
        if (L->ent.v[t] < 0) return perr(s, "entropy[%zu] is negative", t);
    size_t idl = 0, gl = 0;
    char *idz = jdecode(s, sid, sid_esc, &idl);
    if (!idz) return -1;
    if (!idl) { free(idz); return perr(s, "seq_id is empty"); }
    char *gz = NULL;
    if (has_g && !(gz = jdecode(s, gid, gid_esc, &gl))) { free(idz); return -1; }
    int64_t ord, grp;
    int rc = new_seq(s, step, idz, idl, gz, gl, has_g, &ord, &grp);
    free(idz);
    free(gz);
    if (rc) return -1;
    for (size_t t = 0; t < T; t++) {
        qs_rl_row r;
        r.step = step;
        r.seq = ord;
        r.pos = (int64_t)t;
        r.grp = grp;
        r.lp_rollout = L->lpr.v[t];
        r.lp_train = L->lpt.v[t];
        r.adv = adv_scalar ? advs : (have[K_ADV] && L->adv.n ? L->adv.v[t] : NAN);
        r.reward = reward;
        r.entropy = have[K_ENT] ? L->ent.v[t] : NAN;
        r.mask = have[K_MASK] && !isnan(L->mask.v[t]) ? (int)L->mask.v[t] : 1;
        r.token_id = have[K_TOKID] && !isnan(L->tok.v[t]) ? (int64_t)L->tok.v[t] : -1;
        if (push(s, &r)) return -1;
    }
    return 0;
}

static int parse_jsonl(pstate *s, const char *p, const char *end)
{
    jline L;
    memset(&L, 0, sizeof L);
    int rc = 0, any = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        s->line++;
        if ((size_t)((nl ? nl : end) - p) > QS_RL_MAX_LINE) { rc = perr(s, "line longer than %u MiB", QS_RL_MAX_LINE >> 20); break; }
        if (!nl) { rc = perr(s, "truncated last line (no newline at the end of the file)"); break; }
        const char *ls = p, *le = nl;
        p = nl + 1;
        while (ls < le && (*ls == ' ' || *ls == '\t' || *ls == '\r')) ls++;
        while (le > ls && (le[-1] == ' ' || le[-1] == '\t' || le[-1] == '\r')) le--;
        if (ls == le) continue;
        if (!any && (size_t)(le - ls) > 10 && memmem(ls, (size_t)(le - ls), "\"schema\"", 8)) {
            /* metadata header: parsed by jansson (once), must be an object with "schema" */
            json_error_t je;
            json_t *h = json_loadb(ls, (size_t)(le - ls), JSON_REJECT_DUPLICATES, &je);
            if (h && json_is_object(h) && json_is_string(json_object_get(h, "schema"))) {
                const char *sc = json_string_value(json_object_get(h, "schema"));
                if (strncmp(sc, "mmlog", 5) != 0) {
                    rc = perr(s, "unknown schema '%.60s' (expected mmlog-v1)", sc);
                    json_decref(h);
                    break;
                }
                s->info->header_json = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
                json_decref(h);
                any = 1;
                continue;
            }
            if (h && json_object_get(h, "schema") && !json_object_get(h, "lp_rollout")) {
                json_decref(h);
                rc = perr(s, "the header's \"schema\" must be a string");
                break;
            }
            json_decref(h);
            if (!h && strstr(je.text, "duplicate")) { rc = perr(s, "%s", je.text); break; }
        }
        any = 1;
        if ((rc = parse_json_line(s, &L, ls, le))) break;
    }
    free(L.lpr.v); free(L.lpt.v); free(L.adv.v); free(L.ent.v); free(L.mask.v); free(L.tok.v);
    if (!rc && !s->info->seqs) rc = qs_fail(s->e, "line %llu: no sequences in the file", (unsigned long long)s->line);
    return rc;
}

/* ---- entry ---------------------------------------------------------------------------------- */

int qs_rl_parse(const char *data, size_t n, const qs_rl_sink *sink, qs_rl_parse_info *info, qs_err *e)
{
    memset(info, 0, sizeof *info);
    pstate s;
    memset(&s, 0, sizeof s);
    s.sink = sink;
    s.info = info;
    s.e = e;
    s.buf = malloc(BATCH * sizeof *s.buf);
    if (!s.buf) return qs_fail(e, "out of memory");
    const char *p = data, *end = data + n;
    /* UTF-8 BOM */
    if (n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3;
    const char *q = p;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')) q++;
    int rc;
    if (q >= end) rc = qs_fail(e, "line 1: empty file");
    else if (*q == '{') { info->format = QS_RL_JSONL; rc = parse_jsonl(&s, p, end); }
    else { info->format = QS_RL_CSV; rc = parse_csv(&s, p, end); }
    if (!rc) rc = flush(&s);
    if (!rc && !info->tokens) rc = qs_fail(e, "no tokens in the file");
    info->lines = s.line;
    free(s.buf);
    free(s.key);
    free(s.cur_id);
    hmap_free(&s.seqs);
    hmap_free(&s.stepn);
    hmap_free(&s.groups);
    if (rc) { free(info->header_json); info->header_json = NULL; }
    return rc;
}

void qs_rl_parse_info_free(qs_rl_parse_info *info)
{
    free(info->header_json);
    info->header_json = NULL;
}
