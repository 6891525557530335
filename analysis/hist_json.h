/* Reading a stored histogram (the "hist" result layout of results.h) back into a qs_hist. */
#ifndef QS_HIST_JSON_H
#define QS_HIST_JSON_H

#include <jansson.h>

#include "metrics.h"

/* 0 ok (h->counts malloc'd: free it), -1 when H is not a histogram object. */
int qs_hist_from_json(json_t *H, qs_hist *h);

#endif
