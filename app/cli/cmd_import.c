/*
** `qscope import PATH...`: import tensor files and directories (see the help text in main.c).
**
** The whole command is one transaction and each file one SAVEPOINT inside it: without
** --keep-going the first bad file rolls everything back, so the database is exactly as before.
*/
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <search.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../../analysis/importer.h"
#include "../../store/tensor.h"

typedef struct { char **v; size_t n, cap; } strvec;

static int sv_push(strvec *s, const char *p)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 32;
        char **nv = realloc(s->v, nc * sizeof *nv);
        if (!nv) return -1;
        s->v = nv; s->cap = nc;
    }
    return (s->v[s->n++] = strdup(p)) ? 0 : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int wanted(const char *name)
{
    static const char *ext[] = {".npy", ".npz", ".safetensors", ".gguf"};
    size_t n = strlen(name);
    for (size_t i = 0; i < 4; i++) {
        size_t m = strlen(ext[i]);
        if (n > m && strcmp(name + n - m, ext[i]) == 0) return 1;
    }
    return 0;
}

/* Directories already walked, by (device, inode), so a symlink loop or a second link to a
** directory is walked once; files already taken, by real path, so a symlinked file is not
** imported twice under two names sharing one source row.  Hard links stay distinct files. */
typedef struct { dev_t dev; ino_t ino; } fileid;
typedef struct { void *dirs, *files; } visited;
static int cmp_id(const void *a, const void *b)
{
    const fileid *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}
static int cmp_path(const void *a, const void *b) { return strcmp(a, b); }

/* 1 if new (and now recorded), 0 if seen before, -1 on OOM */
static int first_dir(visited *v, const struct stat *st)
{
    fileid *k = malloc(sizeof *k);
    if (!k) return -1;
    k->dev = st->st_dev;
    k->ino = st->st_ino;
    fileid **f = tsearch(k, &v->dirs, cmp_id);
    if (!f) { free(k); return -1; }
    if (*f != k) { free(k); return 0; }
    return 1;
}
static int first_file(visited *v, const char *path)
{
    char *k = realpath(path, NULL);
    if (!k && !(k = strdup(path))) return -1;
    char **f = tsearch(k, &v->files, cmp_path);
    if (!f) { free(k); return -1; }
    if (*f != k) { free(k); return 0; }
    return 1;
}

/* Collect tensor files under dir, recursively, sorted so imports are deterministic.  Symlinks
** are followed, but each directory is walked and each file taken once. */
static int walk(const char *dir, strvec *out, visited *seen)
{
    DIR *d = opendir(dir);
    if (!d) return qs_cli_error(-1, "%s: %s", dir, strerror(errno));
    strvec here = {0};
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) && !rc) {
        if (de->d_name[0] == '.') continue;
        char *p;
        if (asprintf(&p, "%s/%s", dir, de->d_name) < 0) { rc = qs_cli_error(-1, "out of memory"); break; }
        struct stat st;
        if (stat(p, &st) == 0 && (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && wanted(de->d_name))) &&
            sv_push(&here, p))
            rc = qs_cli_error(-1, "out of memory");
        free(p);
    }
    closedir(d);
    qsort(here.v, here.n, sizeof *here.v, cmp_str);
    for (size_t i = 0; i < here.n && !rc; i++) {
        struct stat st;
        if (stat(here.v[i], &st)) continue;
        int fresh = S_ISDIR(st.st_mode) ? first_dir(seen, &st) : first_file(seen, here.v[i]);
        if (fresh < 0) rc = qs_cli_error(-1, "out of memory");
        else if (!fresh) continue;
        else if (S_ISDIR(st.st_mode)) rc = walk(here.v[i], out, seen);
        else if (sv_push(out, here.v[i])) rc = qs_cli_error(-1, "out of memory");
    }
    for (size_t i = 0; i < here.n; i++) free(here.v[i]);
    free(here.v);
    return rc;
}

static void print_report(qs_cli *cli, json_t *rep)
{
    size_t i;
    json_t *o;
    json_array_foreach(rep, i, o) {
        const char *status = json_string_value(json_object_get(o, "status"));
        if (strcmp(status, "removed") == 0) {
            printf("%-9s %lld tensor(s) no longer in %s\n", status,
                   (long long)json_integer_value(json_object_get(o, "count")),
                   qs_esc(json_string_value(json_object_get(o, "name"))));
            continue;
        }
        uint64_t shape[QS_MAX_DIMS];
        json_t *sh = json_object_get(o, "shape");
        int nd = (int)json_array_size(sh);
        for (int k = 0; k < nd && k < QS_MAX_DIMS; k++) shape[k] = (uint64_t)json_integer_value(json_array_get(sh, (size_t)k));
        char shs[128], sz[32];
        qs_shape_str(shape, nd, shs, sizeof shs);
        qs_fmt_bytes((double)json_integer_value(json_object_get(o, "nbytes")), sz, sizeof sz);
        printf("%s%-9s%s %-40s %-14s %-10s %10s  %s\n", strcmp(status, "unchanged") ? qs_c_bold(cli) : qs_c_dim(cli),
               status, qs_c_off(cli), qs_esc(json_string_value(json_object_get(o, "name"))), shs,
               json_string_value(json_object_get(o, "dtype")), sz, json_string_value(json_object_get(o, "storage")));
    }
}

int qs_cmd_import(qs_cli *cli, int argc, char **argv)
{
    static const struct option lo[] = {
        {"copy", no_argument, 0, 'c'}, {"prefix", required_argument, 0, 'p'}, {"as", required_argument, 0, 'a'},
        {"keep-going", no_argument, 0, 'k'}, {"json", no_argument, 0, 'J'}, {"jobs", required_argument, 0, 'j'},
        {0, 0, 0, 0}};
    qs_import_opts o = {.jobs = 2};
    int json = 0, keep_going = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "j:", lo, NULL)) != -1) {
        switch (ch) {
        case 'c': o.copy = 1; break;
        case 'p': o.prefix = optarg; break;
        case 'a':
            o.reinterpret = qs_dtype_from_name(optarg);
            if (o.reinterpret != QS_DT_BF16 && o.reinterpret != QS_DT_F16 && o.reinterpret != QS_DT_F8_E4M3 &&
                o.reinterpret != QS_DT_F8_E5M2 && o.reinterpret != QS_DT_F8_E8M0)
                return qs_cli_usage("import", "--as takes bf16, f16, f8_e4m3, f8_e5m2 or f8_e8m0, not '%s'", optarg);
            break;
        case 'k': keep_going = 1; break;
        case 'J': json = 1; break;
        case 'j': {
            unsigned long long j;
            if (qs_parse_u64(optarg, &j) || j < 1 || j > 256) return qs_cli_usage("import", "bad --jobs '%s'", optarg);
            o.jobs = (int)j;
            break;
        }
        default: return qs_cli_usage("import", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return qs_cli_usage("import", "no files given");

    strvec files = {0};
    int rc = QS_EXIT_OK;
    visited seen = {0};
    json_t *warn = json_array();
    o.warnings = warn;
    for (int i = optind; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) { rc = qs_cli_error(QS_EXIT_ERR, "%s: %s", argv[i], strerror(errno)); goto done; }
        if (S_ISDIR(st.st_mode)) {
            if (first_dir(&seen, &st) == 0) continue;
            if (walk(argv[i], &files, &seen)) { rc = QS_EXIT_ERR; goto done; }
        } else if (sv_push(&files, argv[i])) { rc = qs_cli_error(QS_EXIT_ERR, "out of memory"); goto done; }
    }
    if (o.prefix && files.n > 1) { rc = qs_cli_usage("import", "--prefix needs exactly one file"); goto done; }
    if (files.n == 0) { rc = qs_cli_error(QS_EXIT_ERR, "no .npy, .npz, .safetensors or .gguf files found"); goto done; }

    qs_db *db = qs_cli_open_db(cli);
    if (!db) { rc = QS_EXIT_ERR; goto done; }
    qs_err e = {{0}};
    json_t *rep = json_array();
    int nbad = 0;
    if (qs_db_begin(db, &e)) { rc = qs_cli_err(QS_EXIT_ERR, &e); goto close; }
    for (size_t i = 0; i < files.n; i++) {
        if (qs_db_savepoint(db, "file", &e)) break;
        if (qs_import_file(db, files.v[i], &o, rep, &e) == 0) {
            qs_db_release(db, "file", &e);
            continue;
        }
        nbad++;
        qs_cli_err(QS_EXIT_ERR, &e);
        qs_db_rollback_to(db, "file");
        if (!keep_going) break;
    }
    if (nbad && !keep_going) {
        /* the error line already said what is wrong; README says nothing was stored */
        qs_db_rollback(db);
        rc = QS_EXIT_ERR;
        goto close;
    }
    if (qs_db_commit(db, &e)) {
        /* name the files being imported (disk full, file size limit at the final write) */
        char *what = NULL;
        if (files.n == 1) what = strdup(files.v[0]);
        else if (asprintf(&what, "%s (and %zu more file%s)", files.v[0], files.n - 1, files.n > 2 ? "s" : "") < 0) what = NULL;
        if (what) qs_err_prefix(&e, what);
        free(what);
        rc = qs_cli_err(QS_EXIT_ERR, &e);
        qs_db_rollback(db);
        goto close;
    }
    /* warnings of the files that were kept, now that they are */
    for (size_t i = 0; i < json_array_size(warn); i++)
        fprintf(stderr, "qscope: %s\n", json_string_value(json_array_get(warn, i)));
    if (json) {
        char *s = json_dumps(rep, JSON_INDENT(2));
        puts(s);
        free(s);
    } else {
        print_report(cli, rep);
    }
    fprintf(stderr, "qscope: %zu tensor entr%s from %zu file(s)%s\n", json_array_size(rep),
            json_array_size(rep) == 1 ? "y" : "ies", files.n - (size_t)nbad, nbad ? ", some files failed" : "");
    if (nbad) rc = QS_EXIT_ERR;
close:
    json_decref(rep);
    qs_db_close(db);
done:
    for (size_t i = 0; i < files.n; i++) free(files.v[i]);
    free(files.v);
    tdestroy(seen.dirs, free);
    tdestroy(seen.files, free);
    json_decref(warn);
    return rc;
}
