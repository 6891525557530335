/*
** The model loader's entry point (see llm_load.h): a directory is a Hugging Face checkpoint
** (llm_load_hf.c), anything else a GGUF file (llm_load_gguf.c); both share llm_load_common.c and the
** architecture table llm_arch.c.  Also the loaded file's release and the vocabulary look-ups.
*/
#include "llm_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int qs_llm_load(const char *path, qs_llm_file *f, qs_err *e)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return qs_llm_load_hf(path, f, e);
    return qs_llm_load_gguf(path, f, e);
}

void qs_llm_file_free(qs_llm_file *f)
{
    qs_llm_free(&f->m);
    free(f->v.text);
    free(f->v.off);
    free(f->v.type);
    free(f->v.mtext);
    free(f->v.moff);
    free(f->v.vhash);
    free(f->v.mhash);
    free(f->v.special);
    free(f->v.pre_json);
    free(f->v.pre_regex);
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
}

int qs_llm_vocab_find(const qs_llm_vocab *v, const char *s)
{
    if (v->vhash) return qs_llm_hash_find(v->text, v->off, v->vhash, v->vhcap, s, strlen(s));
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->text + v->off[i], s) == 0) return i;
    return -1;
}

/* GPT-2 bytes_to_unicode inverse: code point -> byte, -1 if the code point is not a byte spelling. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return (int)cp;
    if (cp >= 256 && cp < 256 + 68) {
        int k = (int)cp - 256, n = 0;
        for (int b = 0; b < 256; b++) {
            if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) continue;
            if (n++ == k) return b;
        }
    }
    return -1;
}

size_t qs_llm_detok(const qs_llm_vocab *v, int id, char *out, size_t cap)
{
    if (!cap) return 0;
    size_t o = 0;
    if (id < 0 || id >= v->n) return (size_t)snprintf(out, cap, "<%d>", id) < cap ? strlen(out) : cap - 1;
    const unsigned char *s = (const unsigned char *)v->text + v->off[id];
    int control = v->type && v->type[id] == 3;
    if (!v->byte_level || control) {
        size_t n = strlen((const char *)s);
        if (n > cap - 1) n = cap - 1;
        memcpy(out, s, n);
        out[n] = 0;
        return n;
    }
    while (*s && o + 1 < cap) {   /* decode UTF-8 code points, map each back to its byte */
        uint32_t cp;
        int k;
        if (*s < 0x80) { cp = *s; k = 1; }
        else if ((*s & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) { cp = (uint32_t)(*s & 0x1F) << 6 | (s[1] & 0x3F); k = 2; }
        else { out[o++] = (char)*s++; continue; }   /* not a byte spelling: copy as is */
        int b = gpt2_byte(cp);
        if (b < 0) { for (int i = 0; i < k && o + 1 < cap; i++) out[o++] = (char)s[i]; }
        else out[o++] = (char)b;
        s += k;
    }
    out[o] = 0;
    return o;
}
