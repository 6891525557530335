/*
** Database-level commands: `info` (summary), `check` (integrity and references), `schema`.
*/
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli.h"
#include "../kernels/qs_version.h"
#include "../store/tensor.h"
#include "../store/json_out.h"
#include "../store/tensor_write.h"

static int64_t scalar(qs_db *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

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
    int64_t nsrc = scalar(db, "SELECT count(*) FROM source");
    int64_t nt = scalar(db, "SELECT count(*) FROM tensor");
    int64_t nel = scalar(db, "SELECT coalesce(sum(numel),0) FROM tensor");
    int64_t bref = scalar(db, "SELECT coalesce(sum(nbytes),0) FROM tensor WHERE storage='ref'");
    int64_t bblob = scalar(db, "SELECT coalesce(sum(nbytes),0) FROM tensor WHERE storage='blob'");
    int64_t nres = scalar(db, "SELECT count(*) FROM result");
    int64_t nruns = scalar(db, "SELECT count(*) FROM rl_run");
    int64_t ntok = scalar(db, "SELECT count(*) FROM rl_token");
    int64_t ver = scalar(db, "PRAGMA user_version");
    int64_t fsize = scalar(db, "SELECT page_count*page_size FROM pragma_page_count, pragma_page_size");
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db->h,
        "SELECT t.name, t.dtype, t.shape, t.nbytes, t.storage, s.absmax, s.kurtosis FROM tensor t"
        " LEFT JOIN tensor_stats s ON s.tensor_id=t.id ORDER BY t.nbytes DESC, t.name LIMIT 12", -1, &st, NULL);
    if (json) {
        json_t *o = json_pack("{s:o,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "database", qs_json_text(db->path), "schema_version",
                              (json_int_t)ver, "qscope", QS_VERSION, "sources", (json_int_t)nsrc, "tensors", (json_int_t)nt,
                              "elements", (json_int_t)nel, "bytes_referenced", (json_int_t)bref, "bytes_embedded",
                              (json_int_t)bblob, "results", (json_int_t)nres, "rl_runs", (json_int_t)nruns,
                              "rl_tokens", (json_int_t)ntok, "file_bytes", (json_int_t)fsize);
        json_t *big = json_array();
        while (st && sqlite3_step(st) == SQLITE_ROW)
            json_array_append_new(big, json_pack("{s:o,s:s,s:o,s:I,s:s}", "name", qs_json_text((const char *)sqlite3_column_text(st, 0)), "dtype",
                                                 sqlite3_column_text(st, 1), "shape",
                                                 json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL), "nbytes",
                                                 (json_int_t)sqlite3_column_int64(st, 3), "storage", sqlite3_column_text(st, 4)));
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
            while (st && sqlite3_step(st) == SQLITE_ROW) {
                int w = qs_text_cols(qs_esc((const char *)sqlite3_column_text(st, 0)));
                if (w > nw) nw = w;
            }
            if (st) sqlite3_reset(st);
            printf("%s  %-*s %-10s %-14s %10s %5s %10s %8s%s\n", qs_c_head(cli), nw, "LARGEST TENSORS", "DTYPE", "SHAPE", "SIZE",
                   "DATA", "ABSMAX", "KURT", qs_c_off(cli));
            while (st && sqlite3_step(st) == SQLITE_ROW) {
                json_t *sh = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
                uint64_t shape[QS_MAX_DIMS];
                int nd = (int)json_array_size(sh);
                for (int k = 0; k < nd && k < QS_MAX_DIMS; k++) shape[k] = (uint64_t)json_integer_value(json_array_get(sh, (size_t)k));
                json_decref(sh);
                char shs[128], sz[32];
                qs_shape_str(shape, nd < QS_MAX_DIMS ? nd : QS_MAX_DIMS, shs, sizeof shs);
                qs_fmt_bytes((double)sqlite3_column_int64(st, 3), sz, sizeof sz);
                const char *en = qs_esc((const char *)sqlite3_column_text(st, 0));
                printf("  %s%*s %-10s %-14s %10s %5s %10.4g %8.3g\n", en, nw - qs_text_cols(en), "", sqlite3_column_text(st, 1),
                       shs, sz, sqlite3_column_text(st, 4), sqlite3_column_double(st, 5), sqlite3_column_double(st, 6));
            }
        } else {
            printf("  (empty: `qscope demo` adds synthetic tensors, `qscope import FILE` real ones)\n");
        }
    }
    sqlite3_finalize(st);
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
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db->h, "PRAGMA integrity_check", -1, &st, NULL);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        if (strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0)
            json_array_append_new(problems, json_pack("{s:s,s:s}", "what", "integrity", "message", sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    sqlite3_prepare_v2(db->h, "PRAGMA foreign_key_check", -1, &st, NULL);
    while (st && sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(problems, json_pack("{s:s,s:s}", "what", "foreign key", "message", sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    /* Every tensor: references must match their file; embedded data must have all its chunks;
    ** --deep re-hashes every tensor's bytes.  Sources imported before their identity was recorded
    ** (schema < 4) get it here when their file still matches. */
    int64_t checked = 0;
    json_t *fill = json_object();   /* source path -> [id, ctime_ns, inode, dev] */
    sqlite3_prepare_v2(db->h, "SELECT name FROM tensor ORDER BY name", -1, &st, NULL);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
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
    sqlite3_finalize(st);
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
        if (!bad) bad = qs_db_exec(db, "COMMIT", &e);
        if (bad) {
            sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
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
