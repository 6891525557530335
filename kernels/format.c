/*
** The format registry (see format.h): the families' descriptor arrays in one list, option names,
** validation and the format-independent code packing.
*/
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format_families.h"

static const struct { const qs_format *a; const size_t *n; const char *name; } kFamilies[QS_FAM_COUNT] = {
#define QS_FAM_ROW_(U, name) {qs_formats_##name, &qs_formats_##name##_n, #name},
    QS_FAMILY_LIST(QS_FAM_ROW_)
#undef QS_FAM_ROW_
};
#define NFAM (sizeof kFamilies / sizeof kFamilies[0])

const char *qs_family_name(qs_family fam) { return (unsigned)fam < QS_FAM_COUNT ? kFamilies[fam].name : "?"; }

size_t qs_format_count(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NFAM; i++) n += *kFamilies[i].n;
    return n;
}

const qs_format *qs_format_at(size_t i)
{
    for (size_t k = 0; k < NFAM; k++) {
        if (i < *kFamilies[k].n) return &kFamilies[k].a[i];
        i -= *kFamilies[k].n;
    }
    return NULL;
}

const qs_format *qs_format_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0, n = qs_format_count(); i < n; i++)
        if (strcmp(qs_format_at(i)->name, name) == 0) return qs_format_at(i);
    return NULL;
}

size_t qs_format_block(const qs_format *f, const qs_qopts *o)
{
    return o && o->block > 0 ? (size_t)o->block : (size_t)f->block;
}

size_t qs_format_nblocks(const qs_format *f, const qs_qopts *o, size_t n)
{
    size_t b = qs_format_block(f, o);
    if (b == 0) return n ? 1 : 0;           /* one block for the whole run (per-tensor) */
    return (n + b - 1) / b;
}

double qs_format_bits_per_elem(const qs_format *f, const qs_qopts *o)
{
    size_t b = qs_format_block(f, o);
    return b ? f->elem_bits + f->meta_bits / (double)b : f->elem_bits;
}

static const char *const kRound[QS_RND_COUNT] = {"default", "rne", "ta", "hr", "sr", "rtz", "tz", "ggml"};
const char *qs_round_name(qs_round r) { return (unsigned)r < QS_RND_COUNT ? kRound[r] : "?"; }
int qs_round_parse(const char *s, qs_round *r)
{
    for (int i = 1; i < QS_RND_COUNT; i++)
        if (strcmp(s, kRound[i]) == 0) { *r = (qs_round)i; return 0; }
    return -1;
}

static const char *const kScale[QS_SCALE_COUNT] = {"floor", "ceil", "even", "rceil", "uos"};
const char *qs_scale_rule_name(qs_scale_rule r) { return r < QS_SCALE_COUNT ? kScale[r] : "?"; }
int qs_scale_rule_parse(const char *s, qs_scale_rule *r, double *qmax)
{
    if (strncmp(s, "uos=", 4) == 0) {
        char *end;
        double q = strtod(s + 4, &end);
        if (*end || !(q > 0) || !isfinite(q)) return -1;
        *r = QS_SCALE_UOS;
        *qmax = q;
        return 0;
    }
    for (int i = 0; i < QS_SCALE_COUNT; i++)
        if (strcmp(s, kScale[i]) == 0) { *r = (qs_scale_rule)i; return 0; }
    return -1;
}

int qs_qopts_check(const qs_format *f, const qs_qopts *o, qs_err *e)
{
    if (o->round != QS_RND_DEFAULT && !(f->round_modes & (1u << o->round))) {
        char modes[64] = "";
        for (int i = 1; i < QS_RND_COUNT; i++)
            if (f->round_modes & (1u << i)) {
                strncat(modes, modes[0] ? "," : "", sizeof modes - strlen(modes) - 1);
                strncat(modes, kRound[i], sizeof modes - strlen(modes) - 1);
            }
        return qs_fail(e, "format %s does not support rounding '%s' (supported: %s)", f->name,
                       qs_round_name(o->round), modes);
    }
    if (!f->has_scale_rule && (o->scale_rule != QS_SCALE_FLOOR || o->uos_qmax != 0))
        return qs_fail(e, "format %s has no power-of-two block scale: --scale-rule does not apply", f->name);
    if (o->block < 0) return qs_fail(e, "block size must be positive");
    if (f->block == 1 && o->block > 1)
        return qs_fail(e, "format %s is an element cast: it has no blocks", f->name);
    /* library variants: each only where the format implements it (qs_format.variants) */
    static const struct { unsigned bit; const char *opt, *where; } kVar[] = {
        {QS_VAR_FLOOR_LOG2F, "--floor-log2f", "MX formats"},
        {QS_VAR_ZERO_POSITIVE, "--zero-positive", "MX formats and element casts with a zero"},
        {QS_VAR_FLUSH_SUBNORMAL, "--flush-subnormal-blocks", "MX formats"},
        {QS_VAR_NONFINITE_TE, "--nonfinite-block te", "MX formats"},
        {QS_VAR_ZERO_BLOCK_SCALE, "--zero-block-scale", "MX formats"},
    };
    const int set[] = {o->floor_log2f, o->zero_positive, o->flush_subnormal_blocks, o->nan_block_te,
                       o->zero_block_scale};
    for (size_t k = 0; k < sizeof kVar / sizeof kVar[0]; k++)
        if (set[k] && !(f->variants & kVar[k].bit))
            return qs_fail(e, "format %s: %s does not apply (%s only)", f->name, kVar[k].opt, kVar[k].where);
    if (o->floor_log2f && o->scale_rule != QS_SCALE_FLOOR)
        return qs_fail(e, "format %s: --floor-log2f is the arithmetic of --scale-rule floor (not %s)", f->name,
                       qs_scale_rule_name(o->scale_rule));
    if (o->zero_block_scale < 0 || o->zero_block_scale > 255)
        return qs_fail(e, "format %s: the all-zero block scale must be an E8M0 code 0x00..0xFE", f->name);
    if (o->nan_block_te < 0 || o->nan_block_te > 1) return qs_fail(e, "format %s: unknown non-finite block rule", f->name);
    return 0;
}

void qs_pack_codes(const uint32_t *codes, size_t n, int bits, uint8_t *out)
{
    size_t nbytes = (n * (size_t)bits + 7) / 8;
    memset(out, 0, nbytes);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = codes[i] & (bits >= 32 ? 0xffffffffu : ((1u << bits) - 1));
        for (int b = 0; b < bits; b++, pos++)
            if (c >> b & 1) out[pos >> 3] |= (uint8_t)(1u << (pos & 7));
    }
}

void qs_unpack_codes(const uint8_t *in, size_t n, int bits, uint32_t *codes)
{
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = 0;
        for (int b = 0; b < bits; b++, pos++) c |= (uint32_t)(in[pos >> 3] >> (pos & 7) & 1) << b;
        codes[i] = c;
    }
}
