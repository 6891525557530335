/*
** `qscope llm tokenize`: the token ids of --prompt TEXT or --text FILE (- = stdin) under a model's
** tokenizer (--model) or a tokenizer alone (--tokenizer: tokenizer.json, a Hugging Face directory or a
** .gguf), through LoPT on --threads N (store/llm_lopt.h; --threads 1 is the sequential tokenizer).
** Output: the ids comma-separated on one line, --npy FILE (int32), or --json with each token's byte
** and character offsets.  See docs/tokenize.md.
*/
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "../../analysis/llm_text.h"
#include "../../kernels/pool.h"
#include "../../store/json_out.h"
#include "../../store/llm_load.h"
#include "../../store/llm_lopt.h"
#include "../../store/npy_write.h"

#define CMD "llm tokenize"

typedef struct {
    const char *model, *tokenizer, *prompt, *text, *npy;
    int chat, json, threads;
    size_t chunk, overlap;
} tok_opts;

static int parse_size(const char *opt, const char *s, size_t lo, size_t hi, size_t *out)
{
    unsigned long long v;
    if (qs_parse_u64(s, &v) || v < lo || v > hi) return qs_cli_usage(CMD, "%s wants bytes in %zu..%zu, not '%s'", opt, lo, hi, s);
    *out = (size_t)v;
    return 0;
}

static int parse(int argc, char **argv, tok_opts *o)
{
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'}, {"tokenizer", required_argument, 0, 'k'},
        {"prompt", required_argument, 0, 'T'}, {"text", required_argument, 0, 'x'},
        {"chat", no_argument, 0, 'C'}, {"json", no_argument, 0, 'j'}, {"npy", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 't'}, {"lopt-chunk", required_argument, 0, 'c'},
        {"lopt-overlap", required_argument, 0, 'O'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 'k': o->tokenizer = optarg; break;
        case 'T': o->prompt = optarg; break;
        case 'x': o->text = optarg; break;
        case 'C': o->chat = 1; break;
        case 'j': o->json = 1; break;
        case 'n': o->npy = optarg; break;
        case 't': if (qs_cli_parse_int(CMD, "--threads", optarg, 1, QS_POOL_MAX, &o->threads)) return QS_EXIT_USAGE; break;
        case 'c': if (parse_size("--lopt-chunk", optarg, 16, (size_t)1 << 30, &o->chunk)) return QS_EXIT_USAGE; break;
        case 'O': if (parse_size("--lopt-overlap", optarg, 1, (size_t)1 << 30, &o->overlap)) return QS_EXIT_USAGE; break;
        case ':': return qs_cli_usage(CMD, "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->model == !o->tokenizer) return qs_cli_usage(CMD, "give one of --model PATH and --tokenizer PATH");
    if (!o->prompt == !o->text) return qs_cli_usage(CMD, "give one of --prompt TEXT and --text FILE");
    if (o->chat && !o->prompt) return qs_cli_usage(CMD, "--chat wraps --prompt TEXT in the chat template");
    if (o->overlap && o->chunk && o->overlap >= o->chunk)   /* the default overlap shrinks to a small chunk */
        return qs_cli_usage(CMD, "--lopt-overlap %zu must be below the chunk length %zu", o->overlap, o->chunk);
    return 0;
}

/* --tokenizer: a .gguf (its vocabulary alone: no weights are read), else tokenizer.json, tokenizer.model,
** vocab.txt or a directory. */
static int load(const tok_opts *o, qs_llm_file *f, qs_err *e)
{
    if (o->model) {
        if (qs_llm_load(o->model, f, e)) return -1;
        fprintf(stderr, "qscope: loaded %s (%s, vocab %d)\n", qs_esc(o->model), qs_llm_title(f), f->v.n);
        return 0;
    }
    size_t l = strlen(o->tokenizer);
    if (l > 5 && !strcmp(o->tokenizer + l - 5, ".gguf")) return qs_llm_load_gguf_vocab(o->tokenizer, f, e);
    return qs_llm_load_tokenizer(o->tokenizer, f, e);
}

/* ids as a 1-D .npy of '<i4' (numpy's '<f4' header of the same shape, the type changed). */
static int write_npy(const char *path, const int32_t *ids, size_t n, qs_err *e)
{
    uint64_t shape[1] = {n};
    char h[256];
    size_t hl = qs_npy_header_f32(shape, 1, h, sizeof h);
    char *t = hl > 10 ? memmem(h + 10, hl - 10, "'<f4'", 5) : NULL;   /* the magic holds NUL bytes */
    if (!t) return qs_fail(e, "%s: cannot make the .npy header", path);
    t[2] = 'i';
    FILE *fp = fopen(path, "wb");
    if (!fp) return qs_fail(e, "%s: cannot create (%s)", path, strerror(errno));
    int bad = fwrite(h, 1, hl, fp) != hl || fwrite(ids, sizeof *ids, n, fp) != n;
    int er = bad ? errno : 0;
    if (fclose(fp) && !bad) { bad = 1; er = errno; }
    if (bad) { remove(path); return qs_fail(e, "%s: write failed (%s)", path, strerror(er)); }
    return 0;
}

/* Characters of s[0..n): a valid UTF-8 sequence or one invalid byte each (as the pre-tokenizer sees them). */
static size_t char_step(const unsigned char *s, size_t n, size_t i)
{
    if (s[i] < 0xC2) return 1;
    size_t k = s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : s[i] < 0xF5 ? 4 : 1;
    if (i + k > n) return 1;
    for (size_t j = 1; j < k; j++)
        if ((s[i + j] & 0xC0) != 0x80) return 1;
    if ((s[i] == 0xE0 && s[i + 1] < 0xA0) || (s[i] == 0xED && s[i + 1] >= 0xA0) || (s[i] == 0xF0 && s[i + 1] < 0x90) ||
        (s[i] == 0xF4 && s[i + 1] >= 0x90))
        return 1;   /* overlong, surrogate or past U+10FFFF */
    return k;
}

/* The JSON document: what was tokenized, LoPT's statistics, then one object per token. */
static void print_json(const tok_opts *o, const char *name, const char *text, size_t len, const int32_t *ids, const uint32_t *off,
                       size_t n, const qs_lopt_stats *st)
{
    json_t *h = json_object();
    qs_json_set_text(h, "source", name);
    qs_json_set_text(h, "tokenizer", o->model ? o->model : o->tokenizer);
    json_object_set_new(h, "bytes", json_integer((json_int_t)len));
    json_object_set_new(h, "count", json_integer((json_int_t)n));
    json_object_set_new(h, "threads", json_integer(o->threads ? o->threads : qs_pool_cpus()));
    json_t *l = json_pack("{s:I,s:I,s:I,s:b}", "chunks", (json_int_t)st->chunks, "anchors", (json_int_t)st->anchors,
                          "regrown", (json_int_t)st->regrown, "fallback", (int)st->fallback);
    json_object_set_new(l, "why", st->why ? json_string(st->why) : json_null());
    json_object_set_new(h, "lopt", l);
    char *js = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!js) return;
    js[strlen(js) - 1] = 0;   /* the closing brace: the tokens follow */
    printf("%s,\"tokens\":[", js);
    free(js);
    const unsigned char *s = (const unsigned char *)text;
    size_t at = 0, chars = 0;   /* characters before byte `at` */
    for (size_t i = 0; i < n; i++) {
        size_t b[2] = {off[2 * i], off[2 * i + 1]}, c[2];
        for (int k = 0; k < 2; k++) {   /* spans never go backwards */
            while (at < b[k]) { at += char_step(s, len, at); chars++; }
            c[k] = chars - (at > b[k]);   /* a span inside a character counts from that character */
        }
        printf("%s{\"id\":%d,\"bytes\":[%zu,%zu],\"chars\":[%zu,%zu]}", i ? "," : "", ids[i], b[0], b[1], c[0], c[1]);
    }
    printf("]}\n");
}

int qs_cmd_llm_tokenize(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    tok_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    qs_err e = {{0}};
    char *text = NULL, hash[33];
    size_t len = 0;
    if (o.text && (!strcmp(o.text, "-") ? qs_eval_read_stdin(&text, &len, hash, &e) : qs_eval_read_text(o.text, &text, &len, hash, &e)))
        return qs_cli_err(QS_EXIT_ERR, &e);
    qs_llm_file f;
    if (load(&o, &f, &e)) { free(text); return qs_cli_err(QS_EXIT_ERR, &e); }
    if (o.prompt) {
        text = o.chat ? qs_llm_chat_text(o.prompt) : strdup(o.prompt);
        if (!text) { qs_llm_file_free(&f); return qs_cli_error(QS_EXIT_ERR, "out of memory"); }
        len = strlen(text);
    }
    const char *name = o.text ? (!strcmp(o.text, "-") ? "stdin" : o.text) : "--prompt";
    qs_lopt_opts lo = {o.threads, o.chunk, o.overlap};
    qs_lopt_stats st;
    int32_t *ids = NULL;
    uint32_t *off = NULL;
    size_t n = 0;
    double t0 = qs_now_s();
    rc = QS_EXIT_ERR;
    if (qs_lopt_tokenize(&f.v, name, text, len, &lo, &ids, o.json ? &off : NULL, &n, &st, &e)) {
        if (o.prompt) rc = QS_EXIT_USAGE;   /* as every llm command reports a --prompt it cannot tokenize */
        goto out;
    }
    if (o.text) {
        int w = qs_pool_width(o.threads, st.chunks);
        fprintf(stderr, "qscope: %zu token%s from %zu byte%s in %.3f s (%d thread%s, %zu chunk%s, %zu anchor%s%s%s)\n", n,
                n == 1 ? "" : "s", len, len == 1 ? "" : "s", qs_now_s() - t0, w, w == 1 ? "" : "s", st.chunks,
                st.chunks == 1 ? "" : "s", st.anchors, st.anchors == 1 ? "" : "s", st.why ? "; sequential: " : "",
                st.why ? st.why : "");
    }
    if (o.npy && write_npy(o.npy, ids, n, &e)) goto out;
    if (o.json) print_json(&o, name, text, len, ids, off, n, &st);
    else if (!o.npy) {
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
        printf("\n");
    }
    rc = fflush(stdout) ? qs_cli_error(QS_EXIT_ERR, "stdout: write failed (%s)", strerror(errno)) : QS_EXIT_OK;
out:
    free(ids); free(off); free(text);
    qs_llm_file_free(&f);
    return rc != QS_EXIT_OK && e.msg[0] ? qs_cli_err(rc, &e) : rc;
}
