/*
** What a format shows of its codes and block metadata (format.h, "The inspector's view"): the split
** of a code into sign / exponent / mantissa fields, the element step and ulp, the value of a block
** scale and a line of text for a block's metadata.  Everything here reads the registry row; the
** family files supply the callbacks for layouts of their own (HiF8's labels, the metadata texts).
*/
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The code's bits, most significant first. */
static void code_bits(const qs_format *f, uint32_t code, char bits[40])
{
    int nb = f->elem_bits;
    for (int i = 0; i < nb && i < 32; i++) bits[i] = (code >> (nb - 1 - i)) & 1 ? '1' : '0';
    bits[nb < 32 ? nb : 32] = 0;
}

static int is_sem(const qs_format *f)   /* sign, exponent, mantissa filling the code */
{
    return f->elem == QS_ELEM_FLOAT && f->ebits > 0 && f->ebits + f->mbits + 1 == f->elem_bits;
}

static int field(qs_code_field *s, qs_field_kind k, const char *bits, int len)
{
    snprintf(s->bits, sizeof s->bits, "%.*s", len, bits);
    s->kind = k;
    return 1;
}

int qs_format_code_fields(const qs_format *f, uint32_t code, qs_code_field out[QS_MAX_FIELDS])
{
    char bits[40];
    code_bits(f, code, bits);
    int nb = (int)strlen(bits), n = 0;
    switch (f->elem) {
    case QS_ELEM_TAPERED: {
        char lab[200];
        f->code_label(code, lab, sizeof lab);
        char *end = strstr(lab, "  ");
        if (end) *end = 0;
        for (char *tok = strtok(lab, " "); tok && n < QS_MAX_FIELDS; tok = strtok(NULL, " "))
            n += field(&out[n], n == 0 ? QS_FIELD_SIGN : QS_FIELD_EXP, tok, (int)strlen(tok));
        if (n >= 3) out[n - 1].kind = QS_FIELD_MANT;
        return n;
    }
    case QS_ELEM_SIGN_MAG:
        n += field(&out[n], QS_FIELD_SIGN, bits, 1);
        n += field(&out[n], QS_FIELD_MANT, bits + 1, nb - 1);
        return n;
    case QS_ELEM_FLOAT:
        if (!is_sem(f)) break;
        n += field(&out[n], QS_FIELD_SIGN, bits, 1);
        n += field(&out[n], QS_FIELD_EXP, bits + 1, f->ebits);
        if (f->mbits > 0) n += field(&out[n], QS_FIELD_MANT, bits + 1 + f->ebits, f->mbits);
        return n;
    case QS_ELEM_UFLOAT:
        if (!(f->ebits > 0 && f->ebits + f->mbits == nb)) break;
        n += field(&out[n], QS_FIELD_EXP, bits, f->ebits);
        if (f->mbits) n += field(&out[n], QS_FIELD_MANT, bits + f->ebits, nb - f->ebits);
        return n;
    case QS_ELEM_INT:   /* two's complement: the sign bit, then the rest */
        n += field(&out[n], QS_FIELD_SIGN, bits, 1);
        n += field(&out[n], QS_FIELD_PLAIN, bits + 1, nb - 1);
        return n;
    case QS_ELEM_UINT:
        break;
    }
    return field(&out[0], QS_FIELD_PLAIN, bits, nb);
}

int qs_format_code_fields_width(const qs_format *f)
{
    if (f->elem == QS_ELEM_TAPERED) return f->label_width;
    qs_code_field s[QS_MAX_FIELDS];
    int n = qs_format_code_fields(f, 0, s), w = n - 1;
    for (int i = 0; i < n; i++) w += (int)strlen(s[i].bits);
    return w;
}

const char *qs_format_field_legend(const qs_format *f)
{
    switch (f->elem) {
    case QS_ELEM_TAPERED: return f->field_legend;
    case QS_ELEM_INT: return "s int";
    case QS_ELEM_SIGN_MAG: return "s q";
    case QS_ELEM_UINT: return "q";
    default: break;
    }
    if (f->ebits > 0 && f->ebits + f->mbits + 1 == f->elem_bits) return f->mbits ? "s e m" : "s e";
    if (f->ebits > 0) return "e";
    return "bits";
}

void qs_format_code_text(const qs_format *f, uint32_t code, char *out, size_t cap)
{
    if (f->code_label) { f->code_label(code, out, cap); return; }
    char bits[40];
    code_bits(f, code, bits);
    int nb = f->elem_bits;
    if (f->ebits + f->mbits + 1 == nb && f->ebits > 0)
        snprintf(out, cap, "%c %.*s %.*s  (sign | exponent %d bits, bias %d | mantissa %d bits)", bits[0], f->ebits, bits + 1,
                 f->mbits, bits + 1 + f->ebits, f->ebits, f->bias, f->mbits);
    else if (f->ebits + f->mbits == nb && f->ebits > 0)
        snprintf(out, cap, "%.*s %.*s  (exponent %d bits, bias %d | mantissa %d bits)", f->ebits, bits, f->mbits, bits + f->ebits,
                 f->ebits, f->bias, f->mbits);
    else
        snprintf(out, cap, "%s", bits);
}

uint32_t qs_format_one_code(const qs_format *f) { return is_sem(f) ? (uint32_t)f->bias << f->mbits : 1; }

/* S times the element grid's spacing in the binade of |x| / S for minifloat elements (subnormal step
** below, top binade's step above); S itself for integer and sign-magnitude elements (grid step 1);
** NaN where not defined (a tapered grid). */
double qs_format_elem_ulp(const qs_format *f, float x, double S)
{
    if (!(S > 0) || !isfinite(S)) return NAN;
    if (is_sem(f)) {
        double t = fabs((double)x) / S;
        int emin = 1 - f->bias;
        int emax = (int)floor(log2(f->max_finite > 0 && f->block == 1 ? f->max_finite : 1e300));
        int E = t > 0 ? (int)floor(log2(t)) : emin;
        if (E < emin) E = emin;
        if (f->block == 1 && E > emax) E = emax;
        if (f->block != 1) {   /* block formats: max_finite is the scaled range; cap at the element's top binade */
            int etop = (1 << f->ebits) - 1 - f->bias;
            if (E > etop) E = etop;
        }
        return S * ldexp(1.0, E - f->mbits);
    }
    if (f->elem == QS_ELEM_INT || f->elem == QS_ELEM_SIGN_MAG || f->elem == QS_ELEM_UINT) return S;
    return NAN;
}

double qs_format_scale_value(const qs_format *f, unsigned code) { return f->scale_value ? f->scale_value(code) : NAN; }

void qs_format_meta_text(const qs_format *f, const qs_qopts *o, const uint8_t *m, float tensor_scale, double step,
                         qs_num_fmt num, char *out, size_t cap)
{
    if (f->meta_bytes == 0) { snprintf(out, cap, "element cast: no block metadata"); return; }
    if (f->meta_text) { f->meta_text(f, o, m, tensor_scale, step, num, out, cap); return; }
    snprintf(out, cap, "metadata 0x");
    for (int i = 0; i < f->meta_bytes; i++) {
        size_t k = strlen(out);
        snprintf(out + k, cap - k, "%02x", m[i]);
    }
}

void qs_format_elem_steps(const qs_format *f, const qs_qopts *o, const uint8_t *m, float tensor_scale, size_t n,
                          float *step)
{
    if (f->elem_steps) { f->elem_steps(f, o, m, n, step); return; }
    uint32_t one = qs_format_one_code(f), *code = calloc(n ? n : 1, sizeof *code);
    qs_err e = {{0}};
    int ok = code != NULL;
    if (ok) {
        for (size_t k = 0; k < n; k++) code[k] = one;
        ok = f->decode(f, o, code, m, tensor_scale, n, step, &e) == 0;
    }
    if (!ok)
        for (size_t k = 0; k < n; k++) step[k] = NAN;
    free(code);
}
