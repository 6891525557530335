/*
** Unit tests for the streaming .npy writer (store/npy_write.c): header bytes exactly as numpy
** 1.24 writes them, data bytes, chunking, standard output, and failures that leave no file.
**
** Each test works in its own fresh directory under $TMPDIR (default /tmp), removed at the end.
*/
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../store/npy_write.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static char tmpdir[512];

static int setup_dir(void **state)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/qs_npy_XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

/* Remove everything in tmpdir (one level: the tests create no subdirectory trees). */
static int teardown_dir(void **state)
{
    DIR *d = opendir(tmpdir);
    if (!d) return -1;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, de->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    return rmdir(tmpdir);
}

static void path_in(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

/* Names in tmpdir, sorted and joined with ',' (to see that no temporary file was left). */
static void dir_listing(char *out, size_t cap)
{
    char names[32][256];
    int n = 0;
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 32) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(names[n++], 256, "%s", de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strncat(out, ",", cap - strlen(out) - 1);
        strncat(out, names[i], cap - strlen(out) - 1);
    }
}

/* Fill callback: element i is i*0.25 - 3 (exact in float for the sizes used); it records the
** calls, and fails on the call numbered fail_at (counting from 0), if that is >= 0. */
typedef struct ramp {
    int calls, fail_at;
    uint64_t starts[16];
    size_t ns[16];
} ramp;

static float ramp_value(uint64_t i) { return (float)i * 0.25f - 3.0f; }

static int ramp_fill(void *ctx, uint64_t start, size_t n, float *out)
{
    ramp *r = ctx;
    if (r->calls < 16) {
        r->starts[r->calls] = start;
        r->ns[r->calls] = n;
    }
    if (r->calls++ == r->fail_at) return -1;
    for (size_t i = 0; i < n; i++) out[i] = ramp_value(start + i);
    return 0;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Check an .npy image against numpy's format: magic, version 1.0, header length, the dict text,
** space padding ending in '\n', data at a multiple of 64, then numel ramp values.  Returns the
** data offset. */
static size_t check_npy(const uint8_t *b, size_t len, const char *shape_text, uint64_t numel)
{
    assert_true(len >= 10);
    assert_memory_equal(b, "\x93NUMPY\x01\x00", 8);
    size_t hl = (size_t)b[8] | (size_t)b[9] << 8;
    size_t data = 10 + hl;
    assert_int_equal(data % 64, 0);
    assert_true(data <= len);
    char dict[256];
    snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }",
             shape_text);
    size_t dl = strlen(dict);
    assert_true(dl < hl);
    assert_memory_equal(b + 10, dict, dl);
    for (size_t i = 10 + dl; i < data - 1; i++) assert_int_equal(b[i], ' ');
    assert_int_equal(b[data - 1], '\n');
    assert_int_equal(len, data + 4 * numel);
    for (uint64_t i = 0; i < numel; i++) {
        float want = ramp_value(i);
        uint32_t w;
        memcpy(&w, &want, 4);
        if (le32(b + data + 4 * i) != w) fail_msg("element %llu differs", (unsigned long long)i);
    }
    return data;
}

/* ---- tests ------------------------------------------------------------------------------- */

/* Header lengths and bytes as numpy 1.24's np.save writes them (padding that leaves room for
** the first axis to grow to 21 digits; checked against numpy for 20000 random shapes). */
static void test_header_like_numpy(void **state)
{
    static const struct { int ndim; uint64_t shape[8]; size_t len; const char *text; } cases[] = {
        {1, {3}, 128, "(3,)"},
        {2, {2, 3}, 128, "(2, 3)"},
        {0, {0}, 128, "()"},
        {1, {0}, 128, "(0,)"},
        {2, {1099511627776ull, 5}, 128, "(1099511627776, 5)"},
        {4, {10, 100000000000000000ull, 100000000000000000ull, 100000000000000000ull}, 192,
         "(10, 100000000000000000, 100000000000000000, 100000000000000000)"},
        {8, {1000000000000ull, 1000000000000ull, 1000000000000ull, 1000000000000ull,
             1000000000000ull, 1000000000000ull, 1000000000000ull, 1000000000000ull}, 256,
         "(1000000000000, 1000000000000, 1000000000000, 1000000000000, 1000000000000, "
         "1000000000000, 1000000000000, 1000000000000)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char h[1024];
        size_t n = qs_npy_header_f32(cases[k].shape, cases[k].ndim, h, sizeof h);
        assert_int_equal(n, cases[k].len);
        check_npy((const uint8_t *)h, n, cases[k].text, 0);
        /* numpy's spare room: 21 - digits(shape[0]) spaces at least, after the dict. */
        size_t dl = strlen(cases[k].text) + 53;   /* the dict text around the shape */
        size_t spaces = n - 10 - dl - 1;
        if (cases[k].ndim > 0) {
            char d0[32];
            assert_true(spaces >= 21 - (size_t)snprintf(d0, sizeof d0, "%llu",
                                                        (unsigned long long)cases[k].shape[0]));
        }
    }
    /* Too small a buffer, too many dimensions. */
    uint64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    char h[1024];
    assert_int_equal(qs_npy_header_f32(s9, 2, h, 100), 0);
    assert_int_equal(qs_npy_header_f32(s9, 9, h, sizeof h), 0);
    assert_int_equal(qs_npy_header_f32(s9, -1, h, sizeof h), 0);
}

static void test_write_small(void **state)
{
    char p[1024];
    path_in(p, sizeof p, "a.npy");
    uint64_t shape[2] = {3, 5};
    ramp r = {.fail_at = -1};
    qs_err e = {{0}};
    assert_int_equal(qs_npy_write_f32(p, shape, 2, ramp_fill, &r, &e), 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.starts[0], 0);
    assert_int_equal(r.ns[0], 15);
    size_t len = 0;
    uint8_t *b = tu_slurp(p, &len);
    assert_non_null(b);
    assert_int_equal(check_npy(b, len, "(3, 5)", 15), 128);
    free(b);
    char ls[512];
    dir_listing(ls, sizeof ls);
    assert_string_equal(ls, "a.npy");

    /* Overwriting an existing file replaces it whole; mode follows the umask like fopen's. */
    uint64_t shape1[1] = {4};
    r = (ramp){.fail_at = -1};
    assert_int_equal(qs_npy_write_f32(p, shape1, 1, ramp_fill, &r, &e), 0);
    b = tu_slurp(p, &len);
    assert_non_null(b);
    check_npy(b, len, "(4,)", 4);
    free(b);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    mode_t um = umask(022);
    umask(um);
    assert_int_equal(st.st_mode & 0777, 0666 & ~um);

    /* Scalar and empty arrays. */
    r = (ramp){.fail_at = -1};
    assert_int_equal(qs_npy_write_f32(p, shape, 0, ramp_fill, &r, &e), 0);
    b = tu_slurp(p, &len);
    assert_non_null(b);
    check_npy(b, len, "()", 1);
    free(b);
    uint64_t empty[2] = {0, 7};
    r = (ramp){.fail_at = -1};
    assert_int_equal(qs_npy_write_f32(p, empty, 2, ramp_fill, &r, &e), 0);
    assert_int_equal(r.calls, 0);
    b = tu_slurp(p, &len);
    assert_non_null(b);
    check_npy(b, len, "(0, 7)", 0);
    free(b);
}

/* More than one chunk: fill sees consecutive windows of at most QS_NPY_WRITE_CHUNK elements. */
static void test_write_chunked(void **state)
{
    char p[1024];
    path_in(p, sizeof p, "big.npy");
    uint64_t rows = (QS_NPY_WRITE_CHUNK * 2 + 12345) / 5, n = rows * 5;
    uint64_t shape[2] = {rows, 5};
    ramp r = {.fail_at = -1};
    qs_err e = {{0}};
    assert_int_equal(qs_npy_write_f32(p, shape, 2, ramp_fill, &r, &e), 0);
    assert_int_equal(r.calls, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(r.starts[i], (uint64_t)i * QS_NPY_WRITE_CHUNK);
    assert_int_equal(r.ns[2], n - 2 * QS_NPY_WRITE_CHUNK);
    size_t len = 0;
    uint8_t *b = tu_slurp(p, &len);
    assert_non_null(b);
    char text[64];
    snprintf(text, sizeof text, "(%llu, 5)", (unsigned long long)rows);
    check_npy(b, len, text, n);
    free(b);
}

/* "-" writes the same bytes to standard output. */
static void test_write_stdout(void **state)
{
    char p[1024], q[1024];
    path_in(p, sizeof p, "stdout.bin");
    path_in(q, sizeof q, "file.npy");
    uint64_t shape[3] = {2, 3, 4};
    qs_err e = {{0}};

    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    ramp r = {.fail_at = -1};
    int rc = qs_npy_write_f32("-", shape, 3, ramp_fill, &r, &e);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    assert_int_equal(rc, 0);

    r = (ramp){.fail_at = -1};
    assert_int_equal(qs_npy_write_f32(q, shape, 3, ramp_fill, &r, &e), 0);
    size_t la = 0, lb = 0;
    uint8_t *a = tu_slurp(p, &la), *b = tu_slurp(q, &lb);
    assert_non_null(a);
    assert_non_null(b);
    check_npy(a, la, "(2, 3, 4)", 24);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
}

static void test_unwritable(void **state)
{
    uint64_t shape[1] = {10};
    ramp r = {.fail_at = -1};
    qs_err e = {{0}};
    char p[1024];

    /* A directory that does not exist. */
    path_in(p, sizeof p, "no-such-dir/x.npy");
    assert_int_equal(qs_npy_write_f32(p, shape, 1, ramp_fill, &r, &e), -1);
    assert_int_equal(r.calls, 0);
    assert_true(strncmp(e.msg, p, strlen(p)) == 0 && e.msg[strlen(p)] == ':');
    assert_non_null(strstr(e.msg, "No such file or directory"));
    assert_null(strchr(e.msg, '\n'));

    /* A path through a regular file. */
    char f[1024];
    path_in(f, sizeof f, "plain");
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    fclose(fp);
    path_in(p, sizeof p, "plain/x.npy");
    assert_int_equal(qs_npy_write_f32(p, shape, 1, ramp_fill, &r, &e), -1);
    assert_non_null(strstr(e.msg, "Not a directory"));

    /* A directory without write permission (meaningless for root, who may write anyway). */
    if (geteuid() != 0) {
        char d[1024];
        path_in(d, sizeof d, "ro");
        assert_int_equal(mkdir(d, 0555), 0);
        path_in(p, sizeof p, "ro/x.npy");
        assert_int_equal(qs_npy_write_f32(p, shape, 1, ramp_fill, &r, &e), -1);
        assert_non_null(strstr(e.msg, "Permission denied"));
        chmod(d, 0755);
    }

    /* The target is a directory: the rename fails and the temporary file goes. */
    char d2[1024];
    path_in(d2, sizeof d2, "adir");
    assert_int_equal(mkdir(d2, 0755), 0);
    assert_int_equal(qs_npy_write_f32(d2, shape, 1, ramp_fill, &r, &e), -1);
    assert_true(strncmp(e.msg, d2, strlen(d2)) == 0);

    /* Bad arguments. */
    assert_int_equal(qs_npy_write_f32(p, shape, 9, ramp_fill, &r, &e), -1);
    assert_non_null(strstr(e.msg, "at most 8 dimensions"));
    assert_int_equal(qs_npy_write_f32("", shape, 1, ramp_fill, &r, &e), -1);
    uint64_t huge[2] = {(uint64_t)1 << 40, (uint64_t)1 << 30};
    assert_int_equal(qs_npy_write_f32(p, huge, 2, ramp_fill, &r, &e), -1);
    assert_non_null(strstr(e.msg, "too large"));

    char ls[512];
    dir_listing(ls, sizeof ls);
    assert_string_equal(ls, "adir,plain");
}

/* The fill callback fails: nothing is left behind, and an existing target keeps its bytes. */
static void test_fill_failure(void **state)
{
    char p[1024];
    path_in(p, sizeof p, "out.npy");
    uint64_t shape[1] = {QS_NPY_WRITE_CHUNK + 10};
    qs_err e = {{0}};

    ramp r = {.fail_at = 1};   /* the second chunk: the first is already on disk */
    assert_int_equal(qs_npy_write_f32(p, shape, 1, ramp_fill, &r, &e), -1);
    assert_int_equal(r.calls, 2);
    char want[1100];
    snprintf(want, sizeof want, "%s: producing the data failed (at element %llu)", p,
             (unsigned long long)QS_NPY_WRITE_CHUNK);
    assert_string_equal(e.msg, want);
    char ls[512];
    dir_listing(ls, sizeof ls);
    assert_string_equal(ls, "");

    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("old contents", f);
    fclose(f);
    r = (ramp){.fail_at = 0};
    assert_int_equal(qs_npy_write_f32(p, shape, 1, ramp_fill, &r, &e), -1);
    size_t len = 0;
    uint8_t *b = tu_slurp(p, &len);
    assert_non_null(b);
    assert_int_equal(len, 12);
    assert_memory_equal(b, "old contents", 12);
    free(b);
    dir_listing(ls, sizeof ls);
    assert_string_equal(ls, "out.npy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_like_numpy),
        cmocka_unit_test_setup_teardown(test_write_small, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_write_chunked, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_write_stdout, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_unwritable, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_fill_failure, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
