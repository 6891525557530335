/*
** The common start of `llm eval` and `llm sensitivity` (llm_text_run.h).
*/
#include "llm_text_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../../analysis/llm_text.h"
#include "par.h"
#include "../../store/io_err.h"

/* the text's ids, comma-separated: for cross-checks with other tools */
static int save(const char *path, const int32_t *ids, int n)
{
    qs_err e = {{0}};
    FILE *fo = fopen(path, "w");
    if (!fo) { qs_write_fail(&e, path, errno); return qs_cli_err(QS_EXIT_ERR, &e); }
    for (int i = 0; i < n; i++) fprintf(fo, "%s%d", i ? "," : "", ids[i]);
    fputc('\n', fo);
    int werr = ferror(fo) ? errno : 0;   /* the reason of a failed fwrite, before fclose may change it */
    if (fclose(fo) || werr) { qs_write_fail(&e, path, werr ? werr : errno); return qs_cli_err(QS_EXIT_ERR, &e); }
    return 0;
}

int qs_llm_text_run_open(qs_llm_text_run *r, const char *cmd, const char *model, const char *text, int ctx, int chunks,
                         int score_all, const char *save_ids)
{
    return qs_llm_text_run_open_w(r, cmd, model, text, ctx, chunks, score_all, save_ids, QS_LLM_WEIGHTS_F32);
}

int qs_llm_text_run_open_w(qs_llm_text_run *r, const char *cmd, const char *model, const char *text, int ctx, int chunks,
                           int score_all, const char *save_ids, qs_llm_weights weights)
{
    memset(r, 0, sizeof *r);
    qs_err e = {{0}};
    if (qs_eval_read_text(text, &r->text, &r->tlen, r->thash, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    if (qs_llm_load_weights_mode(model, weights, &r->f, r->weights, sizeof r->weights, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    if (ctx > r->f.m.c.ctx) return qs_cli_usage(cmd, "--ctx %d exceeds the model context %d", ctx, r->f.m.c.ctx);
    if (!r->f.v.n) return qs_cli_error(QS_EXIT_ERR, "%s: the model has no vocabulary to tokenize the text", model);
    if (qs_eval_text_ids(text, &r->f, r->text, r->tlen, &r->ids, &r->ntok, &e)) return qs_cli_err(QS_EXIT_ERR, &e);
    int rc;
    if (save_ids && qs_par_rank() == 0 && (rc = save(save_ids, r->ids, r->ntok))) return rc;
    /* llama.cpp wants two chunks for the second-half convention; all positions need one */
    int need = score_all ? ctx : 2 * ctx;
    if (r->ntok < need)
        return qs_cli_error(QS_EXIT_USAGE, "%s: %d tokens is too short for --ctx %d (needs at least %d tokens%s)", text, r->ntok,
                            ctx, need, score_all ? "" : "; --score all needs one chunk");
    const int add_bos = r->f.v.add_bos && r->f.v.bos >= 0;
    r->su = (qs_eval_setup){ctx, r->ntok / ctx, score_all, add_bos ? r->f.v.bos : -1};
    if (chunks && chunks < r->su.nchunks) r->su.nchunks = chunks;
    return 0;
}

void qs_llm_text_run_free(qs_llm_text_run *r)
{
    qs_llm_file_free(&r->f);
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

int qs_llm_parse_score(const char *cmd, const char *s, int *score_all)
{
    if (!strcmp(s, "half")) *score_all = 0;
    else if (!strcmp(s, "all")) *score_all = 1;
    else return qs_cli_usage(cmd, "--score is half or all, not '%s'", s);
    return 0;
}
