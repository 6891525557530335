/*
** The training runs of `qscope runs` (see runs_train.h).
*/
#include "runs_train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_record.h"
#include "../../store/io_err.h"
#include "../../store/json_out.h"
#include "../../store/train_store.h"

static json_t *item_json(const qs_train_run_item *r)
{
    json_t *o = json_pack("{s:s,s:I,s:i,s:i,s:s,s:s,s:s}", "status", r->status, "id", (json_int_t)r->id, "steps",
                          r->steps, "steps_done", r->steps_done, "data_hash", r->data_hash, "tool_version",
                          r->tool_version, "created_at", r->created_at);
    json_object_set_new(o, "seed", json_integer((json_int_t)r->seed));   /* as train --json has it */
    qs_json_set_text(o, "run", r->name);
    qs_json_set_text(o, "recipe", r->recipe);
    qs_json_add_nums(o, "val0", r->val0, "val_final", r->val_final, (const char *)NULL);
    if (*r->sweep) qs_json_set_text(o, "sweep", r->sweep);
    if (*r->checkpoint) qs_json_set_text(o, "checkpoint", r->checkpoint);
    if (*r->error) qs_json_set_text(o, "error", r->error);
    if (*r->finished_at) json_object_set_new(o, "finished_at", json_string(r->finished_at));
    json_t *m = json_loads(r->model, 0, NULL), *op = json_loads(r->options, 0, NULL);
    json_object_set_new(o, "model", m ? m : json_object());
    json_object_set_new(o, "options", op ? op : json_object());
    return o;
}

static void fmt_loss(double v, char *buf, size_t cap)
{
    if (isnan(v)) snprintf(buf, cap, "-"); else snprintf(buf, cap, "%.4f", v);
}

int qs_runs_train_list(qs_cli *cli, qs_db *db, const char *pat, json_t *arr)
{
    qs_err e = {{0}};
    qs_train_run_item *r;
    size_t n;
    if (qs_train_run_list(db, pat, &r, &n, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    if (!arr && n)
        printf("\n%straining runs%s\n%s%-32s %-14s %6s %-8s %13s %-17s %s%s\n", qs_c_bold(cli), qs_c_off(cli),
               qs_c_head(cli), "RUN", "RECIPE", "SEED", "STATUS", "STEPS", "VAL0 -> FINAL", "CREATED", qs_c_off(cli));
    for (size_t i = 0; i < n; i++) {
        if (arr) { json_array_append_new(arr, item_json(&r[i])); continue; }
        char steps[32], v0[24], v1[24], val[64];
        snprintf(steps, sizeof steps, "%d/%d", r[i].steps_done, r[i].steps);
        fmt_loss(r[i].val0, v0, sizeof v0);
        fmt_loss(r[i].val_final, v1, sizeof v1);
        snprintf(val, sizeof val, "%s -> %s", v0, v1);
        printf("%-32s %-14s %6llu %-8s %13s %-17s %s\n", qs_esc(r[i].name), qs_esc(r[i].recipe),
               (unsigned long long)r[i].seed, r[i].status, steps, val, r[i].created_at);
    }
    qs_train_run_items_free(r, n);
    return QS_EXIT_OK;
}

int qs_runs_train_exists(qs_db *db, const char *name)
{
    qs_err e = {{0}};
    qs_train_run_item it;
    int found = qs_train_run_get(db, name, &it, &e);
    if (found < 0) { qs_cli_err(QS_EXIT_ERR, &e); return -1; }
    if (found) qs_train_run_item_clear(&it);
    return found;
}

int qs_runs_train_export(qs_db *db, const char *name, const char *out)
{
    qs_err e = {{0}};
    qs_train_run_item it;
    int found = qs_train_run_get(db, name, &it, &e);
    if (found < 0) return qs_cli_err(QS_EXIT_ERR, &e);
    if (!found) return qs_cli_error(QS_EXIT_ERR, "no run named '%s' (see `qscope runs`)", qs_esc(name));
    int64_t id = it.id;
    qs_train_run_item_clear(&it);
    qs_train_step_row *s;
    size_t n;
    if (qs_train_run_steps(db, id, &s, &n, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) { free(s); return qs_cli_error(QS_EXIT_ERR, "%s: cannot create: %s", out, strerror(errno)); }
    qs_train_csv_header(f);
    for (size_t i = 0; i < n; i++) qs_train_csv_row(f, &s[i]);
    free(s);
    int werr = ferror(f) ? (errno ? errno : EIO) : 0;
    if (f != stdout) { if (fclose(f) != 0 && !werr) werr = errno ? errno : EIO; } else fflush(f);
    if (werr) { qs_write_fail(&e, out, werr); return qs_cli_err(QS_EXIT_ERR, &e); }
    return QS_EXIT_OK;
}
