/*
** libFuzzer target for the format-spec parsers: `-f fp8_e4m3:scale=row,mxfp4:block=16` lists
** (app/cli/quant_opts.c, qs_quant_parse_list), one format of an `llm` command (qs_llm_parse_fmt) and
** `llm eval --config w=F,a=F,kv=F,resq=MODE` strings (app/cli/cmd_llm_eval.c, driven through the command
** itself with a text file that does not exist, so a good spec ends at "cannot open").
**
** Input: one mode byte (mode % 3 picks the parser), then the spec up to the first NUL; in the --config
** mode each line is one --config.  Any input: no crash, a result in range, and an error is exactly
** one line (names in it escaped).  A parsed format: a name, a label that starts with it and needs no
** escaping, canonical options as JSON, and the same spec parsed again gives the same options.
*/
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../app/cli/cli.h"
#include "../../app/cli/quant_opts.h"
#include "../../store/text_escape.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)
#define CAP 8

/* The commands print their errors on stderr: catch them in memory, one input at a time (sanitizer
** and libFuzzer reports do not go through this FILE). */
static FILE *g_err, *g_stderr;
static char *g_buf;
static size_t g_len;

static void catch_begin(void)
{
    g_err = open_memstream(&g_buf, &g_len);
    CHECK(g_err != NULL);
    g_stderr = stderr;
    stderr = g_err;
}

/* What was printed: nothing (ok) or one line (an error). */
static void catch_end(int failed)
{
    fflush(g_err);
    stderr = g_stderr;
    if (failed) {
        CHECK(g_len > 0 && g_buf[g_len - 1] == '\n' && memchr(g_buf, '\n', g_len) == g_buf + g_len - 1);
        CHECK(!strncmp(g_buf, "qscope", 6));
    } else
        CHECK(g_len == 0);
    fclose(g_err);
    free(g_buf);
    g_buf = NULL;
}

static void check_parsed(const qs_apply *a, int llm)
{
    CHECK(a->f != NULL && a->f->name != NULL);
    char label[128];
    qs_quant_label(a, NULL, label, sizeof label);
    CHECK(strlen(label) < sizeof label);
    CHECK(!strncmp(label, a->f->name, strlen(a->f->name)));
    CHECK(qs_text_plain(label, 0));
    char *js = qs_quant_opts_json(a);
    CHECK(js != NULL);
    json_t *j = json_loads(js, 0, NULL);
    CHECK(j != NULL);
    json_decref(j);
    free(js);
    if (llm) CHECK(a->axis == 1 && a->gran != QS_GRAN_COL);
}

static int same_opts(const qs_apply *a, const qs_apply *b)
{
    char *x = qs_quant_opts_json(a), *y = qs_quant_opts_json(b);
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

static void list_mode(const char *spec, int llm)
{
    qs_apply base, apps[CAP], again[CAP];
    memset(&base, 0, sizeof base);
    base.axis = 1;
    catch_begin();
    int n = llm ? (qs_llm_parse_fmt("fuzz", spec, apps) ? -1 : 1) : qs_quant_parse_list("fuzz", spec, &base, apps, CAP);
    catch_end(n < 0);
    CHECK(n == -1 || (n >= 1 && n <= CAP));
    for (int i = 0; i < n; i++) check_parsed(&apps[i], llm);
    if (n < 0) return;
    catch_begin();
    int m = llm ? (qs_llm_parse_fmt("fuzz", spec, again) ? -1 : 1) : qs_quant_parse_list("fuzz", spec, &base, again, CAP);
    catch_end(m < 0);
    CHECK(m == n);
    for (int i = 0; i < n; i++) CHECK(same_opts(&apps[i], &again[i]));
}

static void config_mode(char *spec)
{
    char *argv[2 * 40 + 8];
    int argc = 0;
    argv[argc++] = "eval";
    argv[argc++] = "--model";
    argv[argc++] = "/nonexistent/qscope-fuzz.gguf";
    argv[argc++] = "--text";
    argv[argc++] = "/nonexistent/qscope-fuzz.txt";
    char *save = NULL;
    for (char *line = strtok_r(spec, "\n", &save); line && argc < (int)(sizeof argv / sizeof *argv) - 2;
         line = strtok_r(NULL, "\n", &save)) {
        argv[argc++] = "--config";
        argv[argc++] = line;
    }
    argv[argc] = NULL;
    qs_cli cli;
    memset(&cli, 0, sizeof cli);
    catch_begin();
    int rc = qs_cmd_llm_eval(&cli, argc, argv);
    catch_end(1);   /* a bad spec (2), or the missing text after good ones (1) */
    CHECK(rc == QS_EXIT_USAGE || rc == QS_EXIT_ERR);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    char *spec = strndup((const char *)data + 1, size - 1);
    CHECK(spec != NULL);
    switch (data[0] % 3) {
    case 0: list_mode(spec, 0); break;
    case 1: list_mode(spec, 1); break;
    default: config_mode(spec); break;
    }
    free(spec);
    return 0;
}
