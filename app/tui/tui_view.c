/*
** The table of views (see tui_view.h): one row of operations per tui_view_id, and each view's
** state, allocated when the application starts and freed when it ends.
*/
#include <stdlib.h>

#include "tui_view.h"

static const tui_view_ops *const kViews[TV_COUNT] = {
#define TUI_VIEW_ROW(id, name, ...) [TV_##id] = &tui_view_##name,
    TUI_VIEW_LIST(TUI_VIEW_ROW, TUI_VIEW_ROW)
#undef TUI_VIEW_ROW
};

const tui_view_ops *tui_view_of(tui_view_id v) { return (unsigned)v < TV_COUNT ? kViews[v] : NULL; }

const char *tui_view_name(tui_view_id v) { return (unsigned)v < TV_COUNT ? kViews[v]->name : "?"; }

void *tui_state(tui *T, tui_view_id v) { return (unsigned)v < TV_COUNT ? T->vstate[v] : NULL; }

int tui_views_init(tui *T)
{
    for (int v = 0; v < TV_COUNT; v++) {
        T->vstate[v] = calloc(1, kViews[v]->state_size ? kViews[v]->state_size : 1);
        if (!T->vstate[v]) return -1;
    }
    for (int v = 0; v < TV_COUNT; v++)
        if (kViews[v]->init) kViews[v]->init(T);
    return 0;
}

void tui_views_free(tui *T)
{
    for (int v = 0; v < TV_COUNT; v++) {
        if (T->vstate[v] && kViews[v]->done) kViews[v]->done(T);
        free(T->vstate[v]);
        T->vstate[v] = NULL;
    }
}

void tui_views_changed(tui *T, int what)
{
    for (int v = 0; v < TV_COUNT; v++)
        if (T->vstate[v] && kViews[v]->changed) kViews[v]->changed(T, what);
}
