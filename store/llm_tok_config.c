/*
** tokenizer_config.json of a Hugging Face directory (see llm_tok.h): which tokens are BOS and EOS
** (by content, a string or an AddedToken object) and whether the tokenizer prepends BOS.  Optional
** and not hashed: it does not change the numbers, only the defaults of the token ids.
*/
#include "llm_tok.h"

#include <jansson.h>
#include <string.h>

#include "container.h"

#define MAX_CONFIG ((size_t)16 << 20)   /* real ones are a few kB (chat templates included) */

int qs_llm_tok_config_parse(const char *buf, size_t n, const qs_llm_vocab *v, qs_llm_tok_cfg *c, qs_err *e)
{
    c->bos = c->eos = c->add_bos = -1;
    if (n > MAX_CONFIG) return qs_fail(e, "larger than %zu bytes", MAX_CONFIG);
    json_error_t je;
    json_t *j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!j) return qs_fail(e, "invalid JSON at line %d: %s", je.line, je.text);
    if (!json_is_object(j)) { json_decref(j); return qs_fail(e, "not a JSON object"); }
    const char *keys[2] = {"bos_token", "eos_token"};
    int *dst[2] = {&c->bos, &c->eos};
    for (int i = 0; i < 2 && v->n; i++) {
        json_t *t = json_object_get(j, keys[i]);
        const char *s = json_is_object(t) ? json_string_value(json_object_get(t, "content")) : json_string_value(t);
        if (s) *dst[i] = qs_llm_vocab_find(v, s);
    }
    json_t *ab = json_object_get(j, "add_bos_token");
    if (json_is_boolean(ab)) c->add_bos = json_is_true(ab);
    json_decref(j);
    return 0;
}

int qs_llm_tok_config_read(const char *path, const qs_llm_vocab *v, qs_llm_tok_cfg *c, qs_err *e)
{
    c->bos = c->eos = c->add_bos = -1;
    qs_file_map m;
    if (qs_file_map_open(path, &m, e)) return -1;
    int rc = qs_llm_tok_config_parse((const char *)m.p, m.n, v, c, e);
    qs_file_map_close(&m);
    if (rc) qs_err_prefix(e, path);
    return rc;
}
