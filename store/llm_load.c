/*
** The model loader's entry point (see llm_load.h): a directory is a Hugging Face checkpoint
** (llm_load_hf.c), anything else a GGUF file (llm_load_gguf.c); both share llm_load_common.c and the
** architecture table llm_arch.c.  Also the loaded file's release (the vocabulary and its
** look-ups are the tokenizer's, llm_tok.c).
*/
#include "llm_load_internal.h"

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
    qs_llm_vocab_free(&f->v);
    qs_llm__unmap(f);
    memset(f, 0, sizeof *f);
    f->v.bos = f->v.eos = -1;
}
