/*
** `qscope llm text --rdb Rdata.rdb [--rdx Rdata.rdx] -o DIR`: write every character vector of an R
** lazy-load database (Jane Austen's novels from Debian's r-cran-janeaustenr) as DIR/NAME.txt, lines
** joined into paragraphs (store/rdata.h).  `make data` runs it; the evaluation text defaults to
** one of these files (QS_LLM_DEFAULT_TEXT).
*/
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../../store/llm_load.h"
#include "../../store/rdata.h"
#include "../../store/container.h"
#include "../../store/io_err.h"
#include "../../store/json_out.h"


/* Write atomically: DIR/.NAME.txt.tmp then rename. */
static int write_text(const char *dir, const char *name, const char *t, size_t n, char *path, size_t cap, qs_err *e)
{
    char tmp[4200];
    snprintf(path, cap, "%s/%s.txt", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.txt.tmp", dir, name);
    FILE *f = fopen(tmp, "wb");
    if (!f) return qs_write_fail(e, tmp, errno);
    int bad = fwrite(t, 1, n, f) != n, er = bad ? errno : 0;
    if (fclose(f) != 0 && !bad) { bad = 1; er = errno; }
    if (!bad && rename(tmp, path)) { bad = 1; er = errno; }
    if (bad) { unlink(tmp); return qs_write_fail(e, path, er); }
    return 0;
}

int qs_cmd_llm_text(qs_cli *cli, int argc, char **argv)
{
    (void)cli;
    const char *rdb = NULL, *rdx = NULL, *dir = NULL;
    int json = 0;
    static const struct option lo[] = {{"rdb", 1, 0, 'b'}, {"rdx", 1, 0, 'x'}, {"json", 0, 0, 'j'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:", lo, NULL)) != -1) {
        switch (c) {
        case 'b': rdb = optarg; break;
        case 'x': rdx = optarg; break;
        case 'o': dir = optarg; break;
        case 'j': json = 1; break;
        case ':': return qs_cli_usage("llm text", "option %s needs a value", argv[optind - 1]);
        default: return qs_cli_usage("llm text", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return qs_cli_usage("llm text", "unexpected argument '%s'", argv[optind]);
    if (!rdb || !dir) return qs_cli_usage("llm text", "--rdb FILE.rdb and -o DIR are required");
    char rdxbuf[4096];
    if (!rdx) {   /* the index sits next to the database: Rdata.rdb -> Rdata.rdx */
        size_t l = strlen(rdb);
        if (l < 4 || strcmp(rdb + l - 4, ".rdb") || l >= sizeof rdxbuf)
            return qs_cli_usage("llm text", "give --rdx FILE: %s does not end in .rdb", rdb);
        memcpy(rdxbuf, rdb, l - 4);
        memcpy(rdxbuf + l - 4, ".rdx", 5);
        rdx = rdxbuf;
    }
    if (strlen(dir) > 4000) return qs_cli_usage("llm text", "-o path too long");
    qs_err e = {{0}};
    qs_file_map mb = {0}, mx = {0};
    qs_rdb_entry *ent = NULL;
    size_t n = 0;
    int rc = QS_EXIT_ERR;
    json_t *arr = json_array();
    if (qs_file_map_open(rdx, &mx, &e) || qs_file_map_open(rdb, &mb, &e)) goto out;
    if (qs_rdx_parse(mx.p, mx.n, &ent, &n, &e)) { qs_err_prefix(&e, rdx); goto out; }
    if (!n) { qs_fail(&e, "%s: the index lists no objects", rdx); goto out; }
    if (mkdir(dir, 0777) && errno != EEXIST) { qs_fail(&e, "%s: cannot create directory: %s", dir, strerror(errno)); goto out; }
    if (!json) printf("%-20s %8s %10s  %s\n", "name", "lines", "bytes", "file");
    for (size_t i = 0; i < n; i++) {
        char *t;
        size_t tl, nl = 0;
        char path[4200];
        if (qs_rdb_text(mb.p, mb.n, ent[i].off, ent[i].len, &t, &tl, &nl, &e)) {
            char pre[4200];
            snprintf(pre, sizeof pre, "%s: object '%s'", rdb, ent[i].name);
            qs_err_prefix(&e, pre);
            goto out;
        }
        int w = write_text(dir, ent[i].name, t, tl, path, sizeof path, &e);
        free(t);
        if (w) goto out;
        if (json) {   /* names are checked (store/rdata.c); the path is the user's: maybe not UTF-8 */
            json_t *o = json_pack("{s:s,s:I,s:I}", "name", ent[i].name, "lines", (json_int_t)nl, "bytes", (json_int_t)tl);
            qs_json_set_text(o, "file", path);
            json_array_append_new(arr, o);
        } else printf("%-20s %8zu %10zu  %s\n", ent[i].name, nl, tl, qs_esc(path));
    }
    if (json) {
        json_t *o = json_pack("{s:s,s:O}", "default", QS_LLM_DEFAULT_TEXT_NAME, "texts", arr);
        qs_json_set_text(o, "rdb", rdb);
        char *js = json_dumps(o, JSON_COMPACT);
        if (js) printf("%s\n", js);
        free(js);
        json_decref(o);
    }
    rc = QS_EXIT_OK;
out:
    json_decref(arr);
    free(ent);
    qs_file_map_close(&mb);
    qs_file_map_close(&mx);
    return rc ? qs_cli_err(rc, &e) : rc;
}
