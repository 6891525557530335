/*
** Training recipe files (see train_recipe_file.h).
*/
#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "llm_plan_file.h"
#include "train_recipe_file.h"
#include "../../kernels/format.h"
#include "../../kernels/llm_recipe.h"

static int refuse(const char *path, const char *why, const char *what)
{
    return qs_cli_error(QS_EXIT_USAGE, "%s: %s%s", qs_esc(path), why, what ? qs_esc(what) : "");
}

int qs_recipe_file_read(const char *cmd, const char *path, qs_recipe_file *rf)
{
    (void)cmd;
    memset(rf, 0, sizeof *rf);
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        FILE *f = fopen(path, "rb");
        if (!f) return qs_cli_error(QS_EXIT_ERR, "%s: cannot read: %s", qs_esc(path), strerror(errno));
        fclose(f);
        return qs_cli_error(QS_EXIT_ERR, "%s: not JSON (line %d: %s)", qs_esc(path), je.line, je.text);
    }
    int rc = 0;
    const char *key;
    json_t *v;
    if (!json_is_object(j)) rc = qs_cli_error(QS_EXIT_ERR, "%s: not a JSON object", qs_esc(path));
    else if (qs_plan_file_is_plan(j)) {   /* read by the caller (train_plan.h) */
        rf->plan = 1;
        json_decref(j);
        return 0;
    }
    json_object_foreach(j, key, v) {
        if (rc) break;
        const char *s = json_string_value(v);
        int op;
        if (!s) { rc = refuse(path, "not a string: ", key); break; }
        if (!strcmp(key, "base")) {
            qs_llm_recipe tmp;
            qs_err e = {{0}};
            if (strlen(s) >= sizeof rf->base || qs_llm_recipe_preset(s, &tmp, &e)) {
                rc = refuse(path, "base: no such preset (" QS_LLM_RECIPE_PRESETS "): ", s);
                break;
            }
            snprintf(rf->base, sizeof rf->base, "%s", s);
            continue;
        }
        if (qs_llm_operand_parse(key, &op)) {
            rc = refuse(path, "unknown key (base, fwd.x, fwd.w, dgrad.dy, dgrad.w, wgrad.dy, wgrad.x): ", key);
            break;
        }
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(s, ":"), s);
        if (strcmp(s, "none") && !qs_format_find(name)) { rc = refuse(path, "unknown format (see `qscope formats`): ", name); break; }
        if (strlen(key) + strlen(s) + 2 > sizeof rf->op[0]) { rc = refuse(path, "format spec too long: ", s); break; }
        snprintf(rf->op[rf->nop++], sizeof rf->op[0], "%s=%s", key, s);
    }
    if (!rc && !rf->nop && !rf->base[0]) rc = refuse(path, "names neither a base preset nor an operand slot", NULL);
    json_decref(j);
    return rc;
}
