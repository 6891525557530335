/*
** Unit tests for bounded-memory streaming: qs_format_apply cuts an int8/int4 run with one scale
** (per tensor, row or column) into pieces under the run's amax and gives the bits of one fakeq over
** the whole run; the ordered .npy writer; an .npy parsed from its header alone and read with pread.
*/
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../kernels/format_apply.h"
#include "../../store/container.h"
#include "../../store/npy_write.h"
#include "../../store/tensor.h"

typedef struct mem { const float *x; float *y; size_t max_read; } mem;
static int rd(void *c, uint64_t s, size_t n, float *out, qs_err *e)
{
    mem *m = c;
    if (n > m->max_read) m->max_read = n;
    memcpy(out, m->x + s, n * sizeof *out);
    return 0;
}
static int wr(void *c, uint64_t s, size_t n, const float *y, qs_err *e)
{
    memcpy(((mem *)c)->y + s, y, n * sizeof *y);
    return 0;
}

static float *data(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = ((float)(int32_t)(s >> 32) / 2147483648.0f) * (i % 97 == 0 ? 40.0f : 1.0f);
    }
    x[12345] = NAN;
    x[n - 7] = INFINITY;
    return x;
}

/* Whole-run references: one fakeq over the tensor, each row, each column. */
static void check_runs(const char *fmt, qs_round rnd)
{
    const qs_format *f = qs_format_find(fmt);
    const uint64_t R = 3, C = 700001, N = R * C;   /* every run longer than a band of 1M values but the columns */
    float *x = data(N, 3), *y = malloc(N * sizeof *y), *ref = malloc(N * sizeof *ref);
    qs_err e = {{0}};
    qs_qopts o = {.round = rnd, .seed = 11};
    for (int g = 0; g < 3; g++) {
        qs_apply a = {.f = f, .o = o, .axis = 1, .gran = g == 0 ? QS_GRAN_TENSOR : g == 1 ? QS_GRAN_ROW : QS_GRAN_COL};
        mem m = {x, y, 0};
        assert_int_equal(qs_format_apply(&a, R, C, rd, &m, wr, &m, &e), 0);
        if (g == 0) {
            assert_int_equal(f->fakeq(f, &o, x, N, ref, &e), 0);
        } else if (g == 1) {
            for (uint64_t r = 0; r < R; r++) {
                qs_qopts ro = o;
                ro.index0 = r * C;
                assert_int_equal(f->fakeq(f, &ro, x + r * C, C, ref + r * C, &e), 0);
            }
        } else {
            float cx[3], cy[3];
            for (uint64_t c = 0; c < C; c++) {
                qs_qopts co = o;
                co.index0 = c * R;
                for (uint64_t r = 0; r < R; r++) cx[r] = x[r * C + c];
                assert_int_equal(f->fakeq(f, &co, cx, R, cy, &e), 0);
                for (uint64_t r = 0; r < R; r++) ref[r * C + c] = cy[r];
            }
        }
        assert_memory_equal(y, ref, N * sizeof *y);   /* bit for bit, NaN included */
        assert_true(m.max_read <= ((size_t)1 << 20));  /* never the whole run at once */
    }
    free(x); free(y); free(ref);
}

static void t_int_runs_in_pieces(void **s)
{
    check_runs("int8", QS_RND_RNE);
    check_runs("int4", QS_RND_SR);
}

static char dir[512];

static void t_writer_and_fd_reader(void **s)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/qs_stream_XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(dir));
    char path[600];
    snprintf(path, sizeof path, "%s/a.npy", dir);
    uint64_t shape[2] = {3, 5};
    float v[15];
    for (int i = 0; i < 15; i++) v[i] = (float)i - 7.5f;
    qs_err e = {{0}};
    qs_npy_writer w;
    /* too few elements: close fails and leaves no file */
    assert_int_equal(qs_npy_writer_open(&w, path, shape, 2, &e), 0);
    assert_int_equal(qs_npy_writer_put(&w, v, 14, &e), 0);
    assert_int_equal(qs_npy_writer_close(&w, &e), -1);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(qs_npy_writer_open(&w, path, shape, 2, &e), 0);
    assert_int_equal(qs_npy_writer_put(&w, v, 6, &e), 0);
    assert_int_equal(qs_npy_writer_put(&w, v + 6, 9, &e), 0);
    assert_int_equal(qs_npy_writer_put(&w, v, 1, &e), -1);   /* more than the array holds */
    assert_int_equal(qs_npy_writer_close(&w, &e), 0);
    /* the header alone parses it, as the whole-image parser does */
    size_t len = 0;
    uint8_t *img = tu_slurp(path, &len);
    qs_container c1, c2;
    assert_int_equal(qs_parse_npy(img, len, NULL, &c1, &e), 0);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(qs_parse_npy_fd(fd, len, NULL, &c2, &e), 0);
    assert_int_equal(c2.n, 1);
    assert_int_equal(c1.t[0].offset, c2.t[0].offset);
    assert_int_equal(c1.t[0].nbytes, c2.t[0].nbytes);
    assert_memory_equal(c1.t[0].shape, c2.t[0].shape, sizeof c1.t[0].shape);
    qs_treader *r = qs_treader_from_fd(fd, &c2.t[0], path, &e);
    close(fd);   /* the reader keeps its own descriptor */
    assert_non_null(r);
    float got[15];
    assert_int_equal(qs_treader_read_f32(r, 4, 11, got, &e), 0);
    assert_memory_equal(got, v + 4, 11 * sizeof *got);
    /* a file cut short under the reader: the read fails naming the file, no signal */
    assert_int_equal(truncate(path, 64), 0);
    assert_int_equal(qs_treader_read_f32(r, 0, 15, got, &e), -1);
    assert_non_null(strstr(e.msg, "shrank"));
    qs_treader_close(r);
    qs_container_free(&c1);
    qs_container_free(&c2);
    free(img);
    unlink(path);
    rmdir(dir);
}

/* A path that is not a regular file (here a FIFO, as /dev/null would be) is written in place, never
** replaced by the renamed temporary file. */
static void t_writer_keeps_special_files(void **s)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/qs_stream_XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(dir));
    char path[600];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    int rfd = open(path, O_RDWR | O_NONBLOCK);   /* a reader, so the writer's open does not block */
    assert_true(rfd >= 0);
    uint64_t shape[1] = {16};
    float v[16] = {0};
    qs_err e = {{0}};
    qs_npy_writer w;
    assert_int_equal(qs_npy_writer_open(&w, path, shape, 1, &e), 0);
    assert_int_equal(qs_npy_writer_put(&w, v, 16, &e), 0);
    assert_int_equal(qs_npy_writer_close(&w, &e), 0);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    uint8_t got[256];
    assert_int_equal(read(rfd, got, sizeof got), 128 + 64);   /* header and data came through it */
    assert_memory_equal(got, "\x93NUMPY", 6);
    close(rfd);
    unlink(path);
    rmdir(dir);
}

/* The header-only parses (.npy, .safetensors) give what the whole-image ones give, errors included,
** on the good and the hostile fixtures, whole and cut short. */
static void parse_both(const char *file)
{
    size_t len = 0;
    uint8_t *img = tu_slurp(file, &len);
    assert_non_null(img);
    for (int cut = 0; cut < 3; cut++) {
        size_t n = cut == 0 ? len : cut == 1 ? (len ? len - 1 : 0) : (len > 20 ? 20 : len);
        const char *t = getenv("TMPDIR");
        char path[600];
        /* the same name ending, as the sniffing looks at it */
        const char *ext = strrchr(file, '.');
        snprintf(path, sizeof path, "%s/qs_stream_XXXXXX%s", t && *t ? t : "/tmp", ext ? ext : "");
        int fd = mkstemps(path, ext ? (int)strlen(ext) : 0);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, img, n), (ssize_t)n);
        qs_container c1, c2;
        qs_err e1 = {{0}}, e2 = {{0}};
        int r1 = qs_parse_any(img, n, path, NULL, &c1, &e1), r2 = qs_parse_fd(fd, n, path, NULL, &c2, &e2);
        if (r1 != r2 || strcmp(e1.msg, e2.msg)) fail_msg("%s cut %d: '%s' vs '%s'", file, cut, e1.msg, e2.msg);
        if (r1 == 0) {
            assert_int_equal(c1.n, c2.n);
            for (size_t k = 0; k < c1.n; k++) {
                assert_string_equal(c1.t[k].name, c2.t[k].name);
                assert_int_equal(c1.t[k].offset, c2.t[k].offset);
                assert_int_equal(c1.t[k].nbytes, c2.t[k].nbytes);
            }
            qs_container_free(&c1);
            qs_container_free(&c2);
        }
        close(fd);
        unlink(path);
    }
    free(img);
}

static void t_header_only_parses(void **s)
{
    const char *dirs[] = {"fixtures/st", "fixtures/bad"};
    int seen = 0;
    for (int d = 0; d < 2; d++) {
        DIR *dp = opendir(dirs[d]);
        assert_non_null(dp);
        struct dirent *de;
        while ((de = readdir(dp)) != NULL) {
            const char *x = strrchr(de->d_name, '.');
            if (!x || (strcmp(x, ".safetensors") && strcmp(x, ".npy"))) continue;
            char f[600];
            snprintf(f, sizeof f, "%s/%s", dirs[d], de->d_name);
            parse_both(f);
            seen++;
        }
        closedir(dp);
    }
    assert_true(seen >= 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_int_runs_in_pieces),
        cmocka_unit_test(t_writer_and_fd_reader),
        cmocka_unit_test(t_writer_keeps_special_files),
        cmocka_unit_test(t_header_only_parses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
