/*
** Unit tests for the .npz reader (store/parse_npz.c): numpy's stored and deflated archives (with
** their ZIP64 local extras), data descriptors, a ZIP64 end record, skipped members, decoded values,
** and a corpus of malformed archives.  Fixtures come from tests/fixtures/make_npy_fixtures.py.
*/
#include "test_loaded_util.h"

#include <math.h>

#include "../../store/container.h"

static void load(loaded *l, const char *path, qs_dtype re) { load_with(l, path, re, qs_parse_npz); }

/* Ranges a consumer will read must lie inside the file. */
static void assert_ranges(const qs_container *c, size_t len)
{
    for (size_t i = 0; i < c->n; i++) {
        const qs_tdesc *t = &c->t[i];
        assert_non_null(t->name);
        if (t->codec == QS_CODEC_NONE) {
            assert_true(t->offset <= len && t->nbytes <= len - t->offset);
        } else {
            assert_int_equal(t->codec, QS_CODEC_DEFLATE);
            assert_true(t->comp_offset <= len && t->comp_size <= len - t->comp_offset);
            assert_int_equal(t->offset + t->nbytes, t->inflated_size);
        }
    }
}

static const qs_tdesc *find(const qs_container *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0) return &c->t[i];
    fail_msg("no tensor '%s'", name);
    return NULL;
}

/* Decode one tensor, inflating the member first when it is deflated. */
static float *decode(const loaded *l, const qs_tdesc *t)
{
    const uint8_t *src = l->buf + t->offset;
    uint8_t *inflated = NULL;
    if (t->codec == QS_CODEC_DEFLATE) {
        size_t got = 0;
        qs_err e;
        inflated = malloc(t->inflated_size);
        assert_non_null(inflated);
        assert_int_equal(qs_inflate_prefix(l->buf + t->comp_offset, t->comp_size, inflated, t->inflated_size, &got, &e), 0);
        assert_int_equal(got, t->inflated_size);
        src = inflated + t->offset;
    }
    const qs_dtype_traits *tr = qs_dtype_get(t->dtype);
    float *v = calloc(t->numel ? t->numel : 1, sizeof *v);
    assert_non_null(v);
    tr->decode(src, v, t->numel / tr->block_elems);
    free(inflated);
    return v;
}

static void assert_tensor(const loaded *l, const char *name, qs_dtype dt, int ndim, const uint64_t *shape,
                          const float *want, size_t n)
{
    const qs_tdesc *t = find(&l->c, name);
    assert_int_equal(t->dtype, dt);
    assert_int_equal(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(t->shape[i], shape[i]);
    assert_int_equal(t->numel, n);
    float *v = decode(l, t);
    for (size_t i = 0; i < n; i++)
        if (v[i] != want[i]) fail_msg("%s[%zu]: got %.9g want %.9g", name, i, (double)v[i], (double)want[i]);
    free(v);
}

static const float kF4[6] = {1.5f, -2.0f, 3.25f, 0.0f, 0.001f, -7.0f};
static const float kI2[4] = {-32768, -2, 0, 32767};
static const float kAr5[5] = {0, 1, 2, 3, 4};
static const uint64_t kS23[2] = {2, 3}, kS4[1] = {4}, kS5[1] = {5};

static void check_numpy_archive(const char *path, qs_codec codec)
{
    loaded l;
    load(&l, path, QS_DT_INVALID);
    if (l.rc) fail_msg("%s: %s", path, l.e.msg);
    assert_string_equal(l.c.kind, "npz");
    assert_int_equal(l.c.n, 3);
    assert_int_equal(l.c.nwarn, 0);
    /* Directory order is numpy's: keyword arrays, then positional ones. */
    assert_string_equal(l.c.t[0].name, "layer/w");
    assert_string_equal(l.c.t[1].name, "b");
    assert_string_equal(l.c.t[2].name, "arr_0");
    for (size_t i = 0; i < l.c.n; i++) assert_int_equal(l.c.t[i].codec, codec);
    assert_ranges(&l.c, l.len);
    assert_tensor(&l, "layer/w", QS_DT_F32, 2, kS23, kF4, 6);
    assert_tensor(&l, "b", QS_DT_I16, 1, kS4, kI2, 4);
    assert_tensor(&l, "arr_0", QS_DT_F32, 1, kS5, kAr5, 5);
    unload(&l);
}

static void test_stored(void **state)
{
    (void)state;
    check_numpy_archive("fixtures/npy/stored.npz", QS_CODEC_NONE);
    /* numpy's local headers carry a 20-byte ZIP64 extra: data = 30 + 11 + 20 + 128. */
    loaded l;
    load(&l, "fixtures/npy/stored.npz", QS_DT_INVALID);
    assert_int_equal(l.c.t[0].offset, 189);
    unload(&l);
}

static void test_deflated(void **state)
{
    (void)state;
    check_numpy_archive("fixtures/npy/deflated.npz", QS_CODEC_DEFLATE);
    loaded l;
    load(&l, "fixtures/npy/deflated.npz", QS_DT_INVALID);
    const qs_tdesc *t = &l.c.t[0];
    assert_int_equal(t->offset, 128);
    assert_int_equal(t->inflated_size, 152);
    assert_int_equal(t->comp_offset, 30 + 11 + 20);
    unload(&l);

    /* A v2 header longer than the first inflated prefix: the prefix is grown to fit it. */
    load(&l, "fixtures/npy/bighdr_v2.npz", QS_DT_INVALID);
    if (l.rc) fail_msg("%s", l.e.msg);
    assert_int_equal(l.c.n, 1);
    assert_true(l.c.t[0].offset > 70000);
    assert_tensor(&l, "big", QS_DT_F32, 2, kS23, kF4, 6);
    unload(&l);
}

static void test_descriptors_and_zip64(void **state)
{
    (void)state;
    static const char *files[] = {"fixtures/npy/dd_stored.npz", "fixtures/npy/dd_deflated.npz"};
    for (int i = 0; i < 2; i++) {
        loaded l;
        load(&l, files[i], QS_DT_INVALID);
        if (l.rc) fail_msg("%s: %s", files[i], l.e.msg);
        assert_int_equal(l.c.n, 2);
        assert_ranges(&l.c, l.len);
        assert_tensor(&l, "arr_0", QS_DT_F32, 2, kS23, kF4, 6);
        assert_tensor(&l, "b", QS_DT_I16, 1, kS4, kI2, 4);
        unload(&l);
    }
    static const char *xy[] = {"fixtures/npy/zip64.npz", "fixtures/npy/descriptor.npz"};
    for (int i = 0; i < 2; i++) {
        loaded l;
        load(&l, xy[i], QS_DT_INVALID);
        if (l.rc) fail_msg("%s: %s", xy[i], l.e.msg);
        assert_int_equal(l.c.n, 2);
        assert_ranges(&l.c, l.len);
        assert_tensor(&l, "x", QS_DT_F32, 2, kS23, kF4, 6);
        assert_tensor(&l, "y", QS_DT_I16, 1, kS4, kI2, 4);
        unload(&l);
    }
}

static void test_empty_and_skipped(void **state)
{
    (void)state;
    loaded l;
    load(&l, "fixtures/npy/empty.npz", QS_DT_INVALID);
    assert_int_equal(l.rc, 0);
    assert_string_equal(l.c.kind, "npz");
    assert_int_equal(l.c.n, 0);
    unload(&l);

    load(&l, "fixtures/npy/extra_member.npz", QS_DT_INVALID);
    if (l.rc) fail_msg("%s", l.e.msg);
    assert_int_equal(l.c.n, 1);
    assert_tensor(&l, "x", QS_DT_F32, 2, kS23, kF4, 6);
    assert_int_equal(l.c.nwarn, 2);
    assert_non_null(strstr(l.c.warnings[0], "'README.txt' is not an .npy file"));
    assert_non_null(strstr(l.c.warnings[1], "'dir/'"));
    unload(&l);
}

static void test_reinterpret_member(void **state)
{
    (void)state;
    loaded l;
    load(&l, "fixtures/npy/bf16_void.npz", QS_DT_BF16);
    if (l.rc) fail_msg("%s", l.e.msg);
    float bf = 3.0e38f;
    uint32_t u;
    memcpy(&u, &bf, 4);
    u &= 0xFFFF0000u;
    memcpy(&bf, &u, 4);
    assert_tensor(&l, "w", QS_DT_BF16, 1, kS4, (float[]){1.0f, -2.0f, 0.15625f, bf}, 4);
    unload(&l);

    load(&l, "fixtures/npy/bf16_void.npz", QS_DT_INVALID);
    assert_int_equal(l.rc, -1);
    assert_err(&l.e, &l.c, "pass --as bf16");
    assert_non_null(strstr(l.e.msg, "in member 'w.npy' (inflated offset 20) (at byte 35)"));
    unload(&l);
}

static void test_bad_corpus(void **state)
{
    (void)state;
    static const struct { const char *file, *phrase; long at; } k[] = {
        {"bad_npz_no_eocd.npz", "no end-of-central-directory record", 0},
        {"bad_npz_cd_outside.npz", "lies outside the archive", 401},
        {"bad_npz_count.npz", "claims 60000 entries", 401},
        {"bad_npz_multidisk.npz", "multi-disk", 405},
        {"bad_npz_cd_sig.npz", "bad central directory entry signature", 299},
        {"bad_npz_lho_outside.npz", "local header offset 2147483632", 341},
        {"bad_npz_local_sig.npz", "bad local header signature", 0},
        {"bad_npz_local_name.npz", "differs from the central directory", 26},
        {"bad_npz_data_outside.npz", "runs past the end of the file", 423},
        {"bad_npz_overlap.npz", "member 'y.npy' overlaps member 'x.npy'", 187},
        {"bad_npz_method.npz", "compression method 12", 309},
        {"bad_npz_encrypted.npz", "encrypted member 'x.npy'", 307},
        {"bad_npz_abs_path.npz", "absolute member path", -1},
        {"bad_npz_dotdot.npz", "'..' component", -1},
        {"bad_npz_backslash.npz", "backslash in member name", -1},
        {"bad_npz_nul_name.npz", "NUL byte in member name", -1},
        {"bad_npz_dup.npz", "duplicate member 'x.npy'", -1},
        {"bad_npz_corrupt_deflate.npz", "corrupt deflate data", 36},
        {"bad_npz_member_header.npz", "object arrays", 55},
        {"bad_npz_member_header_deflated.npz", "big-endian dtype >f4 not supported in member 'x.npy' (inflated offset 20)", 35},
        {"bad_npz_member_trunc.npz", "array data truncated", -1},
        {"bad_npz_size_mismatch.npz", "member size mismatch", -1},
        {"bad_npz_zip64_locator.npz", "ZIP64 end-of-central-directory offset", -1},
        {"bad_npz_crc_stored.npz", "CRC-32 mismatch (directory 3fd555bd, data 876932d8) in member 'x.npy'", 315},
        {"bad_npz_deflate_truncated.npz", "deflate stream is truncated in member 'z.npy'", 287},
        {"bad_npz_crc_deflated.npz", "CRC-32 mismatch (directory 123a9cf6, data 123a9cf7) in member 'y.npy'", 366},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) check_bad_file(k[i].file, k[i].phrase, k[i].at, qs_parse_npz);
}

/* The member's npy header error points at the absolute byte of the offending descr. */
static void test_member_error_offset(void **state)
{
    (void)state;
    loaded l;
    load(&l, "fixtures/bad/bad_npz_member_header.npz", QS_DT_INVALID);
    const uint8_t *hit = memmem(l.buf, l.len, "'|O'", 4);
    assert_non_null(hit);
    char at[64];
    snprintf(at, sizeof at, "in member 'x.npy' (at byte %zu)", (size_t)(hit - l.buf));
    if (!strstr(l.e.msg, at)) fail_msg("'%s' lacks '%s'", l.e.msg, at);
    unload(&l);
}

/* Every prefix fails cleanly; single-byte changes either fail cleanly or give in-file ranges. */
static void test_truncations_and_flips(void **state)
{
    (void)state;
    static const char *files[] = {"fixtures/npy/stored.npz", "fixtures/npy/deflated.npz", "fixtures/npy/zip64.npz"};
    for (int f = 0; f < 3; f++) {
        size_t len = 0;
        uint8_t *good = tu_slurp(files[f], &len);
        assert_non_null(good);
        for (size_t n = 0; n < len; n++) {
            uint8_t *b = malloc(n ? n : 1);
            memcpy(b, good, n);
            qs_container c;
            qs_err e;
            if (qs_parse_npz(b, n, NULL, &c, &e) == 0) {
                assert_ranges(&c, n);        /* a shorter archive can still be whole (none here) */
                qs_container_free(&c);
            } else {
                assert_err(&e, &c, "");
            }
            free(b);
        }
        for (size_t i = 0; i < len; i++) {
            for (int x = 0; x < 256; x += 51) {
                uint8_t *b = malloc(len);
                memcpy(b, good, len);
                b[i] ^= (uint8_t)(x | 1);
                qs_container c;
                qs_err e;
                qs_parse_opts o = {x & 2 ? QS_DT_BF16 : QS_DT_INVALID};
                if (qs_parse_npz(b, len, &o, &c, &e) == 0) {
                    assert_ranges(&c, len);
                    qs_container_free(&c);
                } else {
                    assert_err(&e, &c, "");
                }
                free(b);
            }
        }
        free(good);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stored),
        cmocka_unit_test(test_deflated),
        cmocka_unit_test(test_descriptors_and_zip64),
        cmocka_unit_test(test_empty_and_skipped),
        cmocka_unit_test(test_reinterpret_member),
        cmocka_unit_test(test_bad_corpus),
        cmocka_unit_test(test_member_error_offset),
        cmocka_unit_test(test_truncations_and_flips),
    };
    return cmocka_run_group_tests_name("npz", tests, NULL, NULL);
}
