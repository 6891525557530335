/*
** The text of `llm eval` and `llm sensitivity`, and what llm commands record of their model and
** text (see llm_text.h).
*/
#include "llm_text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "../store/container.h"
#include "../store/json_out.h"
#include "../store/llm_lopt.h"

/* The largest --text: its tokens take 4 bytes per byte of text at worst. */
#define TEXT_MAX ((size_t)1 << 30)

/* Read f to the end, up to TEXT_MAX (one byte past it meaning too large); cap: the first buffer.
** Errors name the text (name). */
static int read_all(FILE *f, const char *name, size_t cap, char **buf, size_t *len, char hash[33], qs_err *e)
{
    size_t n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) return qs_fail(e, "%s: out of memory (%zu bytes for the text)", name, cap);
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        if (n > TEXT_MAX) { free(b); return qs_fail(e, "%s: larger than the 1 GiB limit for a text", name); }
        size_t ncap = cap * 2 > TEXT_MAX + 1 ? TEXT_MAX + 1 : cap * 2;
        char *nb = realloc(b, ncap);
        if (!nb) free(b);
        b = nb;
        cap = ncap;
    }
    if (ferror(f)) { free(b); return qs_fail(e, "%s: read error (%s)", name, strerror(errno)); }
    XXH128_hash_t h = XXH3_128bits(b, n);
    snprintf(hash, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    *buf = b;
    *len = n;
    return 0;
}

/* A regular file's size is checked before anything is read; a pipe is read up to the limit. */
int qs_eval_read_text(const char *path, char **buf, size_t *len, char hash[33], qs_err *e)
{
    int fd = qs_open_regular(path, e);   /* a FIFO would block the read */
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f) close(fd);
    if (!f) return fd < 0 ? -1 : qs_fail(e, "%s: cannot open (%s)", path, strerror(errno));
    struct stat st = {0};
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uintmax_t)st.st_size > TEXT_MAX) {
        fclose(f);
        return qs_fail(e, "%s: %jd bytes, larger than the 1 GiB limit for a text", path, (intmax_t)st.st_size);
    }
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : (size_t)1 << 16;
    int rc = read_all(f, path, cap, buf, len, hash, e);
    fclose(f);
    return rc;
}

int qs_eval_read_stdin(char **buf, size_t *len, char hash[33], qs_err *e)
{
    return read_all(stdin, "stdin", (size_t)1 << 16, buf, len, hash, e);
}

int qs_eval_text_ids(const char *path, const qs_llm_file *f, const char *text, size_t tlen, int32_t **ids, int *ntok,
                     qs_err *e)
{
    *ids = NULL;
    if (!f->v.n) return qs_fail(e, "%s: the model has no vocabulary to tokenize the text", path);
    int32_t *t = NULL;
    size_t n = 0;
    if (qs_lopt_tokenize(&f->v, path, text, tlen, NULL, &t, NULL, &n, NULL, e)) return -1;   /* LoPT, all cores */
    if (n >= (size_t)1 << 30) { free(t); return qs_fail(e, "%s gives more than %d tokens", path, 1 << 30); }
    /* as llama-perplexity tokenizes (add_special): a vocabulary that adds BOS gets it at the start of
    ** the text too, so chunk boundaries match; BOS then also replaces the first token of each chunk */
    const int add_bos = f->v.add_bos && f->v.bos >= 0;
    int32_t *p = realloc(t, (n + 1) * sizeof *p);
    if (!p) { free(t); return qs_fail(e, "%s: out of memory (%zu bytes for the tokens of the text)", path, (n + 1) * sizeof *p); }
    if (add_bos) { memmove(p + 1, p, n * sizeof *p); p[0] = f->v.bos; }
    *ids = p;
    *ntok = (int)n + add_bos;
    return 0;
}

json_t *qs_llm_model_json(const char *path, const qs_llm_file *f)
{
    json_t *j = json_object();
    qs_json_set_text(j, "path", path);
    qs_json_set_text(j, "name", f->name);   /* from the file's metadata: anything, cut at 127 bytes */
    json_object_set_new(j, "hash", json_string(f->hash));
    json_object_set_new(j, "tensor_types", json_string(f->wtypes));
    return j;
}

json_t *qs_llm_text_json(const char *path, const char *hash, size_t bytes)
{
    json_t *j = json_object();
    qs_json_set_text(j, "path", path);
    json_object_set_new(j, "hash", json_string(hash));
    json_object_set_new(j, "bytes", json_integer((json_int_t)bytes));
    return j;
}

