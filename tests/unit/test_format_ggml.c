/*
** Tests for llama.cpp's quantization types (kernels/format_ggml*.c):
**   - every block of every type byte for byte against ggml's own quantizers, on the committed inputs
**     (tests/verify/ggml_vectors, made by tests/verify/ggml_ref_gen.sh from ggml's ggml-quants.c);
**   - decoding those blocks against ggml's dequantize_row_* (FNV-1a of its output) and against the
**     importers' decoders (kernels/dtype.c) where they exist;
**   - the registry rows: encode -> decode, fakeq and fakeq_meta agree bit for bit, codes and headers
**     pack to ggml's bytes, a partial block is the zero-padded block, options refused;
**   - with QS_GGML_PEER_DIR (tests/e2e/ggml_quant.sh sets it): the tensors llama-quantize wrote,
**     every block against qscope's encoding of the F32 model's weights.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/dtype.h"
#include "../../kernels/format_families.h"
#include "../../kernels/format_ggml.h"
#include "../../kernels/simd.h"
#include "../../store/imatrix.h"

#define NIN 4096
#define VEC "verify/ggml_vectors/"

static const char *const kTypes[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1", "q2_k",
                                     "q3_k", "q4_k", "q5_k", "q6_k", "q8_k", "iq4_nl", "iq4_xs"};
#define NTYPES (sizeof kTypes / sizeof kTypes[0])

static float *load_input(void)
{
    size_t len = 0;
    float *x = (float *)tu_slurp(VEC "input.f32", &len);
    assert_non_null(x);
    assert_int_equal(len, NIN * sizeof(float));
    return x;
}

static uint8_t *load_ref(const char *name, size_t want)
{
    char path[256];
    snprintf(path, sizeof path, VEC "%s.bin", name);
    size_t len = 0;
    uint8_t *b = tu_slurp(path, &len);
    assert_non_null(b);
    assert_int_equal(len, want);
    return b;
}

/* Differing blocks of two block arrays; prints the first. */
static size_t count_diff(const char *what, const uint8_t *a, const uint8_t *b, size_t nb, size_t bytes)
{
    size_t nd = 0;
    for (size_t k = 0; k < nb; k++)
        if (memcmp(a + k * bytes, b + k * bytes, bytes)) {
            if (!nd) {
                size_t i = 0;
                while (a[k * bytes + i] == b[k * bytes + i]) i++;
                print_message("# %s: block %zu differs first at byte %zu (0x%02x, ggml 0x%02x)\n", what, k, i,
                              a[k * bytes + i], b[k * bytes + i]);
            }
            nd++;
        }
    return nd;
}

/* Every block of every type at every SIMD level the CPU has (the vectorised fits give ggml's bits). */
static void test_blocks_match_ggml(void **state)
{
    (void)state;
    float *x = load_input();
    size_t bad = 0;
    for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        for (size_t t = 0; t < NTYPES; t++) {
            const qs_ggml_codec *c = qs_ggml_codec_find(kTypes[t]);
            assert_non_null(c);
            size_t nb = NIN / (size_t)c->blk, nbytes = nb * (size_t)c->bytes;
            uint8_t *ref = load_ref(c->name, nbytes), *got = malloc(nbytes);
            qs_err e = {{0}};
            assert_int_equal(qs_ggml_quantize(c, x, NIN, got, &e), 0);
            size_t nd = count_diff(c->name, got, ref, nb, (size_t)c->bytes);
            print_message("# %-6s %3zu blocks, %zu differing (%s)\n", c->name, nb, nd, qs_simd_name(lvl));
            bad += nd;
            free(ref);
            free(got);
        }
    }
    qs_simd_force(-1);
    free(x);
    assert_int_equal(bad, 0);
}

/* q8_0 / q8_1 under --round rne against ggml-cpu's x86 SIMD quantizers (llama.cpp's activations). */
static void test_cpu_activation_blocks(void **state)
{
    (void)state;
    float *x = load_input();
    static const char *const names[] = {"q8_0", "q8_1"};
    for (int t = 0; t < 2; t++) {
        const qs_format *f = qs_format_find(names[t]);
        qs_qopts o = {0};
        o.round = QS_RND_RNE;
        const qs_ggml_codec *c = qs_ggml_codec_opt(f, &o), *r = qs_ggml_codec_of(f);
        assert_true(c != r);
        char name[32];
        snprintf(name, sizeof name, "%s_cpu", names[t]);
        size_t nb = NIN / 32, nbytes = nb * (size_t)c->bytes;
        uint8_t *ref = load_ref(name, nbytes), *got = malloc(nbytes), *refq = malloc(nbytes);
        qs_err e = {{0}};
        assert_int_equal(qs_ggml_quantize(c, x, NIN, got, &e), 0);
        assert_int_equal(qs_ggml_quantize(r, x, NIN, refq, &e), 0);
        size_t nd = count_diff(name, got, ref, nb, (size_t)c->bytes), nref = 0;
        for (size_t k = 0; k < nb; k++) nref += memcmp(refq + k * c->bytes, ref + k * c->bytes, (size_t)c->bytes) != 0;
        print_message("# %s %zu blocks, %zu differing; quantize_row_%s_ref differs in %zu\n", name, nb, nd, names[t], nref);
        assert_int_equal(nd, 0);
        assert_true(nref > 0);   /* the two arithmetics are distinguished by the vectors */
        free(ref); free(got); free(refq);
    }
    free(x);
}

/* With an importance matrix: 16 rows of 256 through ggml's quantize_<type>(.., qw), every level. */
static void test_imatrix_blocks(void **state)
{
    (void)state;
    float *x = load_input();
    size_t len = 0;
    float *qw = (float *)tu_slurp(VEC "imatrix.f32", &len);
    assert_non_null(qw);
    assert_int_equal(len, 256 * sizeof(float));
    static const char *const names[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k",
                                        "q6_k", "iq4_nl", "iq4_xs"};
    size_t bad = 0;
    for (int lvl = QS_SIMD_SCALAR; lvl <= qs_simd_cpu(); lvl++) {
        qs_simd_force(lvl);
        for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
            const qs_ggml_codec *c = qs_ggml_codec_find(names[t]);
            char name[32];
            snprintf(name, sizeof name, "%s.imat", names[t]);
            size_t nb = NIN / (size_t)c->blk, nbytes = nb * (size_t)c->bytes;
            uint8_t *ref = load_ref(name, nbytes), *got = malloc(nbytes), *plain = load_ref(names[t], nbytes);
            qs_err e = {{0}};
            assert_int_equal(qs_ggml_quantize_imatrix(c, x, NIN / 256, 256, qw, got, &e), 0);
            size_t nd = count_diff(name, got, ref, nb, (size_t)c->bytes), nplain = 0;
            for (size_t k = 0; k < nb; k++) nplain += memcmp(plain + k * c->bytes, ref + k * c->bytes, (size_t)c->bytes) != 0;
            print_message("# %-11s %3zu blocks, %zu differing (%s); %zu differ from the plain quantizer's\n", name, nb, nd,
                          qs_simd_name(lvl), nplain);
            assert_true(c->encw ? nplain > 0 : nplain == 0);   /* the importances change the blocks */
            bad += nd;
            free(ref); free(got); free(plain);
        }
    }
    qs_simd_force(-1);
    free(qw);
    free(x);
    assert_int_equal(bad, 0);
}

static uint64_t fnv(const float *y, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *p = (const uint8_t *)y;
    for (size_t i = 0; i < 4 * n; i++) { h ^= p[i]; h *= 0x100000001b3ull; }
    return h;
}

/* ggml's blocks decoded here hash as ggml's dequantize_row_* output does; the importer's decoders agree. */
static void test_decode_matches_ggml(void **state)
{
    (void)state;
    size_t len = 0;
    char *txt = (char *)tu_slurp(VEC "deq.txt", &len);
    assert_non_null(txt);
    txt = realloc(txt, len + 1);
    txt[len] = 0;
    static const struct { const char *name; qs_dtype dt; } kDt[] = {
        {"q8_0", QS_DT_Q8_0}, {"q4_0", QS_DT_Q4_0}, {"q4_1", QS_DT_Q4_1}, {"q5_0", QS_DT_Q5_0},
        {"q5_1", QS_DT_Q5_1}, {"q4_k", QS_DT_Q4_K}, {"q6_k", QS_DT_Q6_K},
    };
    float *y = malloc(NIN * sizeof *y), *z = malloc(NIN * sizeof *z);
    int checked = 0;
    for (size_t t = 0; t < NTYPES; t++) {
        const qs_ggml_codec *c = qs_ggml_codec_find(kTypes[t]);
        uint8_t *ref = load_ref(c->name, NIN / (size_t)c->blk * (size_t)c->bytes);
        qs_err e = {{0}};
        assert_int_equal(qs_ggml_dequantize(c, ref, NIN, y, &e), 0);
        char key[32];
        snprintf(key, sizeof key, "%s ", c->name);
        const char *line = strstr(txt, key);
        if (line) {
            unsigned long long want = strtoull(line + strlen(key), NULL, 16);
            if (fnv(y, NIN) != want) fail_msg("%s: decoded blocks differ from ggml's dequantize_row", c->name);
            checked++;
        }
        for (size_t k = 0; k < sizeof kDt / sizeof kDt[0]; k++)
            if (!strcmp(kDt[k].name, c->name)) {
                qs_dtype_get(kDt[k].dt)->decode(ref, z, NIN / (size_t)c->blk);
                if (memcmp(y, z, NIN * sizeof *y)) fail_msg("%s: kernels/dtype.c decodes differently", c->name);
            }
        free(ref);
    }
    assert_int_equal(checked, (int)NTYPES - 1);   /* all but q8_1, which ggml does not dequantize */
    free(y);
    free(z);
    free(txt);
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static void assert_same_bits(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (f2u(a[i]) != f2u(b[i])) fail_msg("%s: element %zu: %a vs %a", what, i, (double)a[i], (double)b[i]);
}

/* The rows: encode/decode/fakeq/fakeq_meta agree and codes + headers are ggml's blocks. */
static void test_registry_rows(void **state)
{
    (void)state;
    float *x = load_input();
    assert_true(qs_formats_ggml_n == NTYPES);
    for (size_t t = 0; t < qs_formats_ggml_n; t++) {
        const qs_format *f = &qs_formats_ggml[t];
        const qs_ggml_codec *c = qs_ggml_codec_of(f);
        assert_non_null(c);
        assert_ptr_equal(qs_format_find(f->name), f);
        assert_int_equal(f->block, c->blk);
        assert_int_equal(f->meta_bytes, c->meta);
        assert_true(c->meta <= 64 && c->blk % c->seg == 0 && c->blk / c->seg <= 16);
        /* bits per weight: ggml's block bytes */
        assert_true(fabs(qs_format_bits_per_elem(f, NULL) - 8.0 * c->bytes / c->blk) < 1e-12);
        size_t nb = NIN / (size_t)c->blk;
        uint32_t *codes = malloc(NIN * sizeof *codes);
        uint8_t *meta = malloc(nb * (size_t)c->meta), *meta2 = malloc(nb * (size_t)c->meta);
        float *y1 = malloc(NIN * sizeof *y1), *y2 = malloc(NIN * sizeof *y2), *y3 = malloc(NIN * sizeof *y3), ts = 0;
        qs_err e = {{0}};
        assert_int_equal(f->encode(f, NULL, x, NIN, codes, meta, &ts, &e), 0);
        assert_int_equal(f->decode(f, NULL, codes, meta, ts, NIN, y1, &e), 0);
        assert_int_equal(f->fakeq(f, NULL, x, NIN, y2, &e), 0);
        assert_int_equal(f->fakeq_meta(f, NULL, x, NIN, y3, meta2, &e), 0);
        assert_same_bits(y1, y2, NIN, f->name);
        assert_same_bits(y1, y3, NIN, f->name);
        assert_memory_equal(meta, meta2, nb * (size_t)c->meta);
        uint8_t *ref = load_ref(c->name, nb * (size_t)c->bytes), blk[512], L[256];
        for (size_t k = 0; k < nb; k++) {
            for (int i = 0; i < c->blk; i++) {
                assert_true(codes[k * (size_t)c->blk + (size_t)i] < (1u << f->elem_bits));
                L[i] = (uint8_t)codes[k * (size_t)c->blk + (size_t)i];
            }
            c->pack(L, meta + k * (size_t)c->meta, blk);
            assert_memory_equal(blk, ref + k * (size_t)c->bytes, (size_t)c->bytes);
        }
        free(ref); free(codes); free(meta); free(meta2); free(y1); free(y2); free(y3);
    }
    free(x);
}

/* A final partial block is the block padded with zeros; element counts of any length work. */
static void test_partial_block(void **state)
{
    (void)state;
    float *x = load_input();
    for (size_t t = 0; t < qs_formats_ggml_n; t++) {
        const qs_format *f = &qs_formats_ggml[t];
        size_t B = (size_t)f->block, n = B + 7;
        float pad[512] = {0}, ya[512], yb[512];
        memcpy(pad, x + 300, n * sizeof(float));
        qs_err e = {{0}};
        assert_int_equal(f->fakeq(f, NULL, x + 300, n, ya, &e), 0);
        assert_int_equal(f->fakeq(f, NULL, pad, 2 * B, yb, &e), 0);
        assert_same_bits(ya, yb, n, f->name);
        float one = 0.5f, y1;
        assert_int_equal(f->fakeq(f, NULL, &one, 1, &y1, &e), 0);
    }
    free(x);
}

/* Non-finite inputs neither crash nor depend on anything but the input. */
static void test_nonfinite(void **state)
{
    (void)state;
    for (size_t t = 0; t < qs_formats_ggml_n; t++) {
        const qs_format *f = &qs_formats_ggml[t];
        float x[256], y1[256], y2[256];
        for (int i = 0; i < 256; i++) x[i] = (float)sin(i) * 3;
        x[3] = NAN; x[40] = INFINITY; x[100] = -INFINITY; x[200] = 3e38f;
        qs_err e = {{0}};
        assert_int_equal(f->fakeq(f, NULL, x, 256, y1, &e), 0);
        assert_int_equal(f->fakeq(f, NULL, x, 256, y2, &e), 0);
        assert_memory_equal(y1, y2, sizeof y1);
    }
}

static void test_options_refused(void **state)
{
    (void)state;
    const qs_format *f = qs_format_find("q4_k");
    assert_non_null(f);
    qs_qopts o = {0};
    qs_err e = {{0}};
    float x[256] = {0}, y[256];
    o.block = 32;
    assert_int_equal(f->fakeq(f, &o, x, 256, y, &e), -1);
    assert_non_null(strstr(e.msg, "fixed blocks of 256"));
    o.block = 0;
    o.round = QS_RND_RNE;
    assert_int_equal(qs_qopts_check(f, &o, &e), -1);
    o.round = QS_RND_GGML;
    assert_int_equal(qs_qopts_check(f, &o, &e), 0);
    assert_int_equal(qs_qopts_check(qs_format_find("mxfp4"), &o, &e), -1);
    assert_ptr_equal(qs_ggml_codec_of(qs_format_find("mxfp4")), NULL);
}

/* Element steps and the analysis' segment scales of a q4_k block follow its header. */
static void test_steps(void **state)
{
    (void)state;
    const qs_format *f = qs_format_find("q4_k");
    float x[256], y[256], step[256], S[8], Q[8];
    for (int i = 0; i < 256; i++) x[i] = (float)cos(0.3 * i) * (1 + i / 32);
    uint8_t m[16];
    qs_err e = {{0}};
    assert_int_equal(f->fakeq_meta(f, NULL, x, 256, y, m, &e), 0);
    f->seg_scales(f, NULL, m, 1, S, Q);
    qs_format_elem_steps(f, NULL, m, 1, 256, step);
    for (int i = 0; i < 256; i++) {
        assert_true(step[i] == S[i / 32]);
        assert_true(fabsf(y[i]) <= Q[i / 32] * 1.000001f);
        float k = (y[i] - y[i - i % 32]) / S[i / 32];   /* values of a sub-block lie on its grid */
        assert_true(fabsf(k - roundf(k)) < 1e-3f);
    }
}

/* ---- the peer: blocks llama-quantize wrote --------------------------------------------------- */

/* A GGUF file's tensors: name, ggml type, element count, data offset (a reader for this test only). */
typedef struct gg_tensor { char name[128]; uint32_t type; uint64_t n, ne0, off; } gg_tensor;
typedef struct gg_file { uint8_t *buf; size_t len; gg_tensor *t; size_t nt; } gg_file;

static int rd(const gg_file *g, size_t *p, void *v, size_t k)
{
    if (*p + k > g->len) return -1;
    memcpy(v, g->buf + *p, k);
    *p += k;
    return 0;
}
static int skip_val(const gg_file *g, size_t *p, uint32_t ty)
{
    static const int kSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (ty > 12) return -1;
    if (ty == 8) { uint64_t l; if (rd(g, p, &l, 8) || l > g->len) return -1; *p += l; return 0; }
    if (ty == 9) {
        uint32_t et; uint64_t n;
        if (rd(g, p, &et, 4) || rd(g, p, &n, 8) || n > g->len) return -1;
        for (uint64_t i = 0; i < n; i++) if (skip_val(g, p, et)) return -1;
        return 0;
    }
    *p += (size_t)kSize[ty];
    return 0;
}
static int gg_open(const char *path, gg_file *g)
{
    memset(g, 0, sizeof *g);
    if (!(g->buf = tu_slurp(path, &g->len)) || g->len < 24 || memcmp(g->buf, "GGUF", 4)) return -1;
    size_t p = 8;
    uint64_t nt, nkv, align = 32;
    if (rd(g, &p, &nt, 8) || rd(g, &p, &nkv, 8) || nt > 100000) return -1;
    for (uint64_t k = 0; k < nkv; k++) {
        uint64_t kl; uint32_t ty;
        if (rd(g, &p, &kl, 8) || kl > 1000 || p + kl > g->len) return -1;
        int is_align = kl == 17 && !memcmp(g->buf + p, "general.alignment", 17);
        p += kl;
        if (rd(g, &p, &ty, 4)) return -1;
        if (is_align && ty == 4) { uint32_t a; if (rd(g, &p, &a, 4)) return -1; align = a; }
        else if (skip_val(g, &p, ty)) return -1;
    }
    g->t = calloc(nt ? nt : 1, sizeof *g->t);
    g->nt = nt;
    for (uint64_t i = 0; i < nt; i++) {
        uint64_t nl; uint32_t nd;
        if (rd(g, &p, &nl, 8) || nl >= sizeof g->t[i].name || rd(g, &p, g->t[i].name, nl) || rd(g, &p, &nd, 4) || nd > 4)
            return -1;
        g->t[i].n = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t v;
            if (rd(g, &p, &v, 8)) return -1;
            g->t[i].n *= v;
            if (d == 0) g->t[i].ne0 = v;
        }
        if (rd(g, &p, &g->t[i].type, 4) || rd(g, &p, &g->t[i].off, 8)) return -1;
    }
    size_t data = (p + align - 1) / align * align;
    for (uint64_t i = 0; i < nt; i++) g->t[i].off += data;
    return 0;
}
static void gg_close(gg_file *g) { free(g->buf); free(g->t); }

static const char *gg_type_name(uint32_t t)
{
    switch (t) {
    case 2: return "q4_0"; case 3: return "q4_1"; case 6: return "q5_0"; case 7: return "q5_1";
    case 8: return "q8_0"; case 10: return "q2_k"; case 11: return "q3_k"; case 12: return "q4_k";
    case 13: return "q5_k"; case 14: return "q6_k"; case 20: return "iq4_nl"; case 23: return "iq4_xs";
    default: return NULL;
    }
}

/* An importance matrix (llama.cpp's GGUF or legacy .dat, store/imatrix.h) as the values llama-quantize
** gives the quantizer: sums / count (GGUF) or sums / ncall (.dat). */
typedef struct gg_imat { char name[128]; float *v; int n; } gg_imat;
static gg_imat *load_imatrix(const char *path, int *count)
{
    qs_imatrix im;
    qs_err e = {{0}};
    if (qs_imatrix_read(path, &im, NULL, &e)) fail_msg("%s", e.msg);
    gg_imat *m = calloc((size_t)im.n, sizeof *m);
    for (int i = 0; i < im.n; i++) {
        snprintf(m[i].name, sizeof m[i].name, "%s", im.e[i].name);
        m[i].n = (int)(im.e[i].ne0 * im.e[i].nmat);
        if (qs_imatrix_weights(&im, &im.e[i], &m[i].v, &e)) fail_msg("%s: %s", path, e.msg);
    }
    *count = im.n;
    qs_imatrix_free(&im);
    return m;
}

/* QS_GGML_PEER_DIR holds f32.gguf and the files llama-quantize made of it (*.gguf, any names, listed
** in QS_GGML_PEER_FILES, space-separated).  Every block of every quantized tensor is compared; with
** QS_GGML_PEER_IMATRIX (the .dat or .gguf llama-quantize was given), tensors it has an entry for are quantized
** with their importances. */
static void test_llama_quantize_peer(void **state)
{
    (void)state;
    const char *dir = getenv("QS_GGML_PEER_DIR"), *files = getenv("QS_GGML_PEER_FILES");
    if (!dir || !files) { tu_skip("data: QS_GGML_PEER_DIR unset (tests/e2e/ggml_quant.sh runs this with llama-quantize)"); return; }
    char path[4096], list[4096];
    snprintf(path, sizeof path, "%s/f32.gguf", dir);
    gg_file src;
    if (gg_open(path, &src)) fail_msg("%s: not a GGUF file this test reads", path);
    snprintf(list, sizeof list, "%s", files);
    const char *imp = getenv("QS_GGML_PEER_IMATRIX");
    int nimat = 0;
    gg_imat *imat = imp && *imp ? load_imatrix(imp, &nimat) : NULL;
    if (imp && *imp && !nimat) fail_msg("%s: an imatrix without entries", imp);
    size_t total_diff = 0, total_blocks = 0, total_imat = 0;
    for (char *tok = strtok(list, " "); tok; tok = strtok(NULL, " ")) {
        snprintf(path, sizeof path, "%s/%s", dir, tok);
        gg_file q;
        if (gg_open(path, &q)) fail_msg("%s: not a GGUF file this test reads", path);
        size_t nblocks = 0, ndiff = 0, ntens = 0;
        char types[256] = "";
        for (size_t i = 0; i < q.nt; i++) {
            const char *tn = gg_type_name(q.t[i].type);
            if (!tn) continue;
            const gg_tensor *s = NULL;
            for (size_t j = 0; j < src.nt && !s; j++)
                if (!strcmp(src.t[j].name, q.t[i].name)) s = &src.t[j];
            if (!s || s->type != 0 || s->n != q.t[i].n) fail_msg("%s: %s has no F32 source", tok, q.t[i].name);
            const qs_ggml_codec *c = qs_ggml_codec_find(tn);
            size_t nb = (size_t)(s->n / (uint64_t)c->blk), bytes = nb * (size_t)c->bytes;
            if (s->off + s->n * 4 > src.len || q.t[i].off + bytes > q.len) fail_msg("%s: %s truncated", tok, q.t[i].name);
            if (!strstr(types, tn) && strlen(types) + strlen(tn) + 2 < sizeof types) { strcat(types, " "); strcat(types, tn); }
            float *x = malloc(s->n * sizeof *x);
            uint8_t *mine = malloc(bytes);
            memcpy(x, src.buf + s->off, s->n * 4);
            qs_err e = {{0}};
            const float *qw = NULL;
            for (int k = 0; k < nimat; k++)
                if (!strcmp(imat[k].name, q.t[i].name) && (uint64_t)imat[k].n == s->ne0) qw = imat[k].v;
            if (qw) {
                assert_int_equal(qs_ggml_quantize_imatrix(c, x, (size_t)(s->n / s->ne0), (size_t)s->ne0, qw, mine, &e), 0);
                total_imat += nb;
            } else {
                assert_int_equal(qs_ggml_quantize(c, x, (size_t)s->n, mine, &e), 0);
            }
            ndiff += count_diff(q.t[i].name, mine, q.buf + q.t[i].off, nb, (size_t)c->bytes);
            nblocks += nb;
            ntens++;
            free(x);
            free(mine);
        }
        print_message("# peer %s: %zu tensors (%s), %zu blocks, %zu differing\n", tok, ntens, types + 1, nblocks, ndiff);
        total_diff += ndiff;
        total_blocks += nblocks;
        gg_close(&q);
    }
    gg_close(&src);
    for (int k = 0; k < nimat; k++) free(imat[k].v);
    free(imat);
    print_message("# peer total: %zu blocks (%zu with an imatrix), %zu differing\n", total_blocks, total_imat, total_diff);
    assert_true(total_blocks > 0);
    assert_int_equal(total_diff, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_match_ggml), cmocka_unit_test(test_cpu_activation_blocks),
        cmocka_unit_test(test_imatrix_blocks),
        cmocka_unit_test(test_decode_matches_ggml),
        cmocka_unit_test(test_registry_rows),     cmocka_unit_test(test_partial_block),
        cmocka_unit_test(test_nonfinite),         cmocka_unit_test(test_options_refused),
        cmocka_unit_test(test_steps),             cmocka_unit_test(test_llama_quantize_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
