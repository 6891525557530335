/*
** The parallel operand quantizer (kernels/llm_fakeq_par.c) and the fast paths of llm_recipe.c give
** the bits of the plain path: copy, the 16-point RHT down the block axis (a strided reference here),
** and qs_format_apply along the slot's axis (16x16 tiles: one qs_format_apply per tile), for every
** preset and operand, on shapes with edges (not multiples of 8, 16 or 64), in place or not, on one
** thread or two.  Axis 0 with stochastic rounding checks the column-major SR counters of the
** transposed panels; NVFP4 checks the whole-matrix tensor scale.
*/
#include "test_util.h"

#include <math.h>

#include "../../kernels/llm_fakeq_par.h"
#include "../../kernels/llm_recipe.h"
#include "../../kernels/sr.h"

typedef struct { const float *x; float *y; } mio;
static int m_rd(void *c, uint64_t st, size_t n, float *out, qs_err *e)
{
    (void)e; memcpy(out, ((mio *)c)->x + st, n * sizeof(float)); return 0;
}
static int m_wr(void *c, uint64_t st, size_t n, const float *y, qs_err *e)
{
    (void)e; memcpy(((mio *)c)->y + st, y, n * sizeof(float)); return 0;
}
static void apply(const qs_apply *a, float *y, size_t rows, size_t cols)
{
    mio io = {y, y};
    qs_err e = {{0}};
    assert_int_equal(qs_format_apply(a, rows, cols, m_rd, &io, m_wr, &io, &e), 0);
}

/* The RHT as the original strided loops: for each run, each 16-block, D then H16 then 1/4. */
static void rht_ref(float *x, size_t rows, size_t cols, int axis, uint64_t seed)
{
    float sg[16];
    for (int i = 0; i < 16; i++) sg[i] = qs_sr_uniform(seed, (uint64_t)i) < 0.5 ? -1.0f : 1.0f;
    size_t len = axis ? cols : rows, nrun = axis ? rows : cols, st = axis ? 1 : cols, rs = axis ? cols : 1;
    for (size_t r = 0; r < nrun; r++)
        for (size_t b = 0; b + 16 <= len; b += 16) {
            float *v = x + r * rs + b * st;
            for (int i = 0; i < 16; i++) v[i * st] *= sg[i];
            for (size_t h = 1; h < 16; h *= 2)
                for (size_t i = 0; i < 16; i += 2 * h)
                    for (size_t j = i; j < i + h; j++) {
                        float p = v[j * st], q = v[(j + h) * st];
                        v[j * st] = p + q;
                        v[(j + h) * st] = p - q;
                    }
            for (size_t i = 0; i < 16; i++) v[i * st] *= 0.25f;
        }
}

/* The slot's quantization the plain way (llm_recipe.c before the fast paths). */
static void reference(const qs_llm_recipe *r, int op, const float *x, size_t rows, size_t cols, uint64_t call, float *y)
{
    const qs_llm_slot *sl = &r->op[op];
    uint64_t cs = qs_llm_recipe_call_seed(r->seed, call);
    memcpy(y, x, rows * cols * sizeof(float));
    if (!sl->on) return;
    if (sl->rht) rht_ref(y, rows, cols, qs_llm_operand_axis(op), cs);
    qs_apply a = sl->a;
    a.axis = qs_llm_operand_axis(op);
    if (sl->sr) {   /* llm_recipe.c's seed rule: mix(cs + op + 1) through a 1-element probe is not public, so */
        return;     /* SR slots are compared against a second run instead (below) */
    }
    if (!sl->tile2d) { apply(&a, y, rows, cols); return; }
    a.axis = 1;
    if (a.f->has_tensor_scale && !(a.o.tensor_scale > 0)) {
        float m = 0;
        for (size_t i = 0; i < rows * cols; i++) if (fabsf(y[i]) > m && fabsf(y[i]) != INFINITY) m = fabsf(y[i]);
        a.o.tensor_scale = m;
    }
    float buf[256];
    for (size_t r0 = 0; r0 < rows; r0 += 16)
        for (size_t c0 = 0; c0 < cols; c0 += 16) {
            size_t h = rows - r0 < 16 ? rows - r0 : 16, w = cols - c0 < 16 ? cols - c0 : 16;
            for (size_t i = 0; i < h; i++) memcpy(buf + i * w, y + (r0 + i) * cols + c0, w * sizeof(float));
            a.o.block = (int)(h * w);
            apply(&a, buf, 1, h * w);
            for (size_t i = 0; i < h; i++) memcpy(y + (r0 + i) * cols + c0, buf + i * w, w * sizeof(float));
        }
}

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double u = qs_sr_uniform(seed, i) * 2 - 1;
        x[i] = (float)(u * (i % 97 == 0 ? 40.0 : 0.05));   /* outliers so that block scales vary */
    }
}

static void test_presets_bit_identical(void **st)
{
    (void)st;
    static const char *const presets[] = {"bf16", "fp8-hybrid", "mxfp8", "mxfp4", "nvfp4", "nvfp4-1d", "hif4", "hif8"};
    static const size_t shapes[][2] = {{200, 328}, {256, 1024}, {1030, 72}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t R = shapes[s][0], C = shapes[s][1], n = R * C;
        float *x = malloc(n * 4), *y = malloc(n * 4), *ref = malloc(n * 4), *z = malloc(n * 4);
        fill(x, n, 17 + s);
        for (size_t p = 0; p < sizeof presets / sizeof *presets; p++) {
            qs_llm_recipe r;
            qs_err e = {{0}};
            assert_int_equal(qs_llm_recipe_preset(presets[p], &r, &e), 0);
            for (int op = 0; op < QS_OP_COUNT; op++) {
                assert_int_equal(qs_llm_recipe_operand(&r, op, x, R, C, 9, y, &e), 0);
                memcpy(z, x, n * 4);   /* in place */
                assert_int_equal(qs_llm_recipe_operand(&r, op, z, R, C, 9, z, &e), 0);
                if (memcmp(y, z, n * 4)) fail_msg("%s %s %zux%zu: in place differs", presets[p], qs_llm_operand_name(op), R, C);
                if (r.op[op].sr) continue;
                reference(&r, op, x, R, C, 9, ref);
                if (memcmp(y, ref, n * 4)) fail_msg("%s %s %zux%zu: differs from the plain path", presets[p], qs_llm_operand_name(op), R, C);
            }
        }
        free(x); free(y); free(ref); free(z);
    }
}

/* SR along either axis: one thread and two give the same bits, and the bits of qs_format_apply with the
** same seed (the counters of the transposed panels are the column-major ones of axis 0). */
static void test_sr_counters(void **st)
{
    (void)st;
    size_t R = 264, C = 200, n = R * C;
    float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4), *ref = malloc(n * 4);
    fill(x, n, 5);
    const char *fmts[] = {"nvfp4", "mxfp4", "bf16"};
    for (int f = 0; f < 3; f++)
        for (int axis = 0; axis <= 1; axis++)
            for (int rht = 0; rht <= 1; rht++) {
                qs_apply a;
                memset(&a, 0, sizeof a);
                a.f = qs_format_find(fmts[f]);
                assert_non_null(a.f);
                a.gran = QS_GRAN_BLOCK;
                a.axis = axis;
                a.o.round = QS_RND_SR;
                a.o.seed = 1234;
                qs_err e = {{0}};
                assert_int_equal(qs_llm_fakeq_par(&a, x, y1, R, C, rht, 77, 1, &e), 0);
                assert_int_equal(qs_llm_fakeq_par(&a, x, y2, R, C, rht, 77, 2, &e), 0);
                if (memcmp(y1, y2, n * 4)) fail_msg("%s axis %d rht %d: 1 and 2 threads differ", fmts[f], axis, rht);
                memcpy(ref, x, n * 4);
                if (rht) rht_ref(ref, R, C, axis, 77);
                apply(&a, ref, R, C);
                if (memcmp(y1, ref, n * 4)) fail_msg("%s axis %d rht %d: differs from qs_format_apply", fmts[f], axis, rht);
            }
    free(x); free(y1); free(y2); free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_bit_identical),
        cmocka_unit_test(test_sr_counters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
