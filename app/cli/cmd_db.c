/*
** Database-level commands: `info` (summary), `check` (integrity and references), `schema`.
*/
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli.h"
#include "../../kernels/qs_version.h"
#include "../../store/tensor.h"
#include "../../store/json_out.h"
#include "../../store/q_db.h"
#include "../../store/q_tensors.h"
#include "../../store/tensor_names.h"
#include "../../store/tensor_write.h"

static int json_flag(int argc, char **argv, const char *cmd, int *json)
{
    *json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) *json = 1;
        else return qs_cli_usage(cmd, "unexpected argument '%s'", argv[i]);
    }
    return 0;
}

int qs_cmd_info(qs_cli *cli, int argc, char **argv)
{
    int json;
    if (json_flag(argc, argv, "info", &json)) return QS_EXIT_USAGE;
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    qs_db_counts cnt;
    qs_db_count(db, &cnt);
    int64_t nsrc = cnt.sources, nt = cnt.tensors, nel = cnt.elements, bref = cnt.bytes_referenced, bblob = cnt.bytes_embedded;
    int64_t nres = cnt.results, nruns = cnt.rl_runs, ntok = cnt.rl_tokens, ver = cnt.schema_version, fsize = cnt.file_bytes;
    qs_tensor_item *big_t = NULL;   /* none when the list cannot be read: the counts still show */
    size_t nbig = 0;
    qs_err e = {{0}};
    if (qs_tensor_largest(db, 12, &big_t, &nbig, &e)) nbig = 0;
    if (json) {
        json_t *o = json_pack("{s:o,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "database", qs_json_text(db->path), "schema_version",
                              (json_int_t)ver, "qscope", QS_VERSION, "sources", (json_int_t)nsrc, "tensors", (json_int_t)nt,
                              "elements", (json_int_t)nel, "bytes_referenced", (json_int_t)bref, "bytes_embedded",
                              (json_int_t)bblob, "results", (json_int_t)nres, "rl_runs", (json_int_t)nruns,
                              "rl_tokens", (json_int_t)ntok, "file_bytes", (json_int_t)fsize);
        json_t *big = json_array();
        for (size_t i = 0; i < nbig; i++)
            json_array_append_new(big, json_pack("{s:o,s:s,s:o,s:I,s:s}", "name", qs_json_text(big_t[i].name), "dtype",
                                                 big_t[i].dtype, "shape",
                                                 json_loads(big_t[i].shape, 0, NULL), "nbytes",
                                                 (json_int_t)big_t[i].nbytes, "storage", big_t[i].storage));
        json_object_set_new(o, "largest", big);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        char a[32], b[32], c[32];
        qs_fmt_bytes((double)bref, a, sizeof a);
        qs_fmt_bytes((double)bblob, b, sizeof b);
        qs_fmt_bytes((double)fsize, c, sizeof c);
        printf("%sqscope %s%s  database %s (schema v%lld, %s)\n", qs_c_bold(cli), QS_VERSION, qs_c_off(cli), qs_esc(db->path),
               (long long)ver, c);
        printf("  %lld tensors from %lld sources, %lld elements (%s referenced in files, %s embedded)\n", (long long)nt,
               (long long)nsrc, (long long)nel, a, b);
        printf("  %lld analysis results, %lld RL runs (%lld tokens)\n", (long long)nres, (long long)nruns, (long long)ntok);
        if (nt > 0) {
            int nw = 40;   /* as wide as the longest name listed: the columns stay aligned */
            for (size_t i = 0; i < nbig; i++) {
                int w = qs_text_cols(qs_esc(big_t[i].name));
                if (w > nw) nw = w;
            }
            printf("%s  %-*s %-10s %-14s %10s %5s %10s %8s%s\n", qs_c_head(cli), nw, "LARGEST TENSORS", "DTYPE", "SHAPE", "SIZE",
                   "DATA", "ABSMAX", "KURT", qs_c_off(cli));
            for (size_t i = 0; i < nbig; i++) {
                json_t *sh = json_loads(big_t[i].shape, 0, NULL);
                uint64_t shape[QS_MAX_DIMS];
                int nd = (int)json_array_size(sh);
                for (int k = 0; k < nd && k < QS_MAX_DIMS; k++) shape[k] = (uint64_t)json_integer_value(json_array_get(sh, (size_t)k));
                json_decref(sh);
                char shs[128], sz[32];
                qs_shape_str(shape, nd < QS_MAX_DIMS ? nd : QS_MAX_DIMS, shs, sizeof shs);
                qs_fmt_bytes((double)big_t[i].nbytes, sz, sizeof sz);
                const char *en = qs_esc(big_t[i].name);
                /* no statistics prints as 0 */
                printf("  %s%*s %-10s %-14s %10s %5s %10.4g %8.3g\n", en, nw - qs_text_cols(en), "", big_t[i].dtype,
                       shs, sz, big_t[i].storage, isnan(big_t[i].absmax) ? 0 : big_t[i].absmax,
                       isnan(big_t[i].kurtosis) ? 0 : big_t[i].kurtosis);
            }
        } else {
            printf("  (empty: `qscope demo` adds synthetic tensors, `qscope import FILE` real ones)\n");
        }
    }
    qs_tensor_items_free(big_t, nbig);
    qs_db_close(db);
    return QS_EXIT_OK;
}

int qs_cmd_check(qs_cli *cli, int argc, char **argv)
{
    int json = 0, deep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--deep") == 0) deep = 1;
        else return qs_cli_usage("check", "unexpected argument '%s'", argv[i]);
    }
    qs_db *db = qs_cli_open_db(cli);
    if (!db) return QS_EXIT_ERR;
    json_t *problems = json_array();
    qs_db_problem *dp;
    size_t ndp;
    qs_err pe = {{0}};
    if (qs_db_problems(db, &dp, &ndp, &pe))
        json_array_append_new(problems, json_pack("{s:s,s:s}", "what", "integrity", "message", pe.msg));
    else
        for (size_t i = 0; i < ndp; i++)
            json_array_append_new(problems, json_pack("{s:s,s:s}", "what", dp[i].what, "message", dp[i].message));
    qs_db_problems_free(dp, ndp);
    /* Every tensor: references must match their file; embedded data must have all its chunks;
    ** --deep re-hashes every tensor's bytes.  Sources imported before their identity was recorded
    ** (schema < 4) get it here when their file still matches. */
    int64_t checked = 0;
    json_t *fill = json_object();   /* source path -> [id, ctime_ns, inode, dev] */
    char **names = NULL;
    size_t nnames = 0;
    int any;
    if (qs_tensor_names_glob(db, "*", &names, &nnames, &any, &pe))
        json_array_append_new(problems, json_pack("{s:s,s:s}", "what", "tensor", "message", pe.msg));
    for (size_t ni = 0; ni < nnames; ni++) {
        const char *name = names[ni];
        qs_tensor_rec t;
        qs_err e = {{0}};
        checked++;
        if (qs_tensor_get(db, name, &t, &e)) {
            json_array_append_new(problems, json_pack("{s:s,s:o,s:o}", "what", "tensor", "tensor", qs_json_text(name), "message", qs_json_text(e.msg)));
            continue;
        }
        qs_treader *r = qs_treader_open(db, &t, &e);
        if (r && deep) {
            char h[33];
            if (qs_treader_hash(r, t.dtype, t.shape, t.ndim, h, &e) || qs_treader_verify(r, &e)) {
                qs_treader_close(r);
                r = NULL;
            } else if (strcmp(h, t.hash) != 0) {
                if (t.is_blob) qs_fail(&e, "tensor '%s': embedded data does not match its hash (re-import it)", t.name);
                else qs_fail(&e, "%s: stale reference for tensor '%s': the content differs from the import "
                             "(hash mismatch; re-import it)", t.source_path, t.name);
                qs_treader_close(r);
                r = NULL;
            }
        } else if (r && t.is_blob) {
            /* touch the last byte of every chunk */
            uint8_t b;
            for (uint64_t off = 0; off < t.nbytes && r; off += QS_CHUNK_BYTES) {
                uint64_t last = off + QS_CHUNK_BYTES > t.nbytes ? t.nbytes - 1 : off + QS_CHUNK_BYTES - 1;
                if (qs_treader_read_bytes(r, last, 1, &b, &e)) { qs_treader_close(r); r = NULL; }
            }
        }
        if (!r) json_array_append_new(problems, json_pack("{s:s,s:o,s:o}", "what", "tensor", "tensor", qs_json_text(name), "message", qs_json_text(e.msg)));
        struct stat fs;
        if (r && !t.is_blob && !t.has_ident && stat(t.source_path, &fs) == 0)
            json_object_set_new(fill, t.source_path, json_pack("[I,I,I,I]", (json_int_t)t.source_id,
                (json_int_t)((int64_t)fs.st_ctim.tv_sec * 1000000000LL + fs.st_ctim.tv_nsec), (json_int_t)fs.st_ino,
                (json_int_t)fs.st_dev));
        qs_treader_close(r);
        qs_tensor_rec_free(&t);
    }
    qs_tensor_names_free(names, nnames);
    if (json_object_size(fill)) {
        qs_err e = {{0}};
        const char *k;
        json_t *v;
        int bad = qs_db_begin(db, &e);
        json_object_foreach(fill, k, v) {
            if (bad) break;
            bad = qs_source_set_identity(db, json_integer_value(json_array_get(v, 0)), json_integer_value(json_array_get(v, 1)),
                                         json_integer_value(json_array_get(v, 2)), json_integer_value(json_array_get(v, 3)), &e);
        }
        if (!bad) bad = qs_db_commit(db, &e);
        if (bad) {
            qs_db_rollback(db);
            json_array_append_new(problems, json_pack("{s:s,s:s}", "what", "source", "message", e.msg));
        }
    }
    json_decref(fill);
    size_t np = json_array_size(problems);
    if (json) {
        json_t *o = json_pack("{s:o,s:b,s:b,s:I,s:O}", "database", qs_json_text(db->path), "ok", np == 0, "deep", deep, "tensors_checked",
                              (json_int_t)checked, "problems", problems);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        size_t i;
        json_t *p;
        json_array_foreach(problems, i, p) printf("%s\n", qs_esc(json_string_value(json_object_get(p, "message"))));
        printf("%s: %lld tensors checked%s, %zu problem(s)\n", qs_esc(db->path), (long long)checked, deep ? " (content re-hashed)" : "",
               np);
    }
    json_decref(problems);
    qs_db_close(db);
    return np ? QS_EXIT_ERR : QS_EXIT_OK;
}

int qs_cmd_schema(qs_cli *cli, int argc, char **argv)
{
    if (argc > 1) return qs_cli_usage("schema", "unexpected argument '%s'", argv[1]);
    for (int v = 1; v <= qs_db_schema_count(); v++) printf("-- migration %d\n%s\n", v, qs_db_schema_sql(v));
    return QS_EXIT_OK;
}
