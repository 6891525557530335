/*
** The cache key of a stored analysis: the tensor's content hash, the format name and the canonical
** JSON of the format options (sorted keys, defaults spelled out), under the tool version
** (analysis/results.h).  The same options always give the same text, so equal keys compare equal.
*/
#ifndef QS_ANALYZE_KEY_H
#define QS_ANALYZE_KEY_H

#include "../kernels/format_apply.h"

/* Canonical JSON text of the options (for stored results and provenance); caller frees. */
char *qs_quant_opts_json(const qs_apply *a);
/* Options JSON of an analysis result: the format options (per-block arrays or not, the metrics
** are the same; the "blocks" kind is present or absent); caller frees. */
char *qs_analysis_options_json(const qs_apply *a, int blocks);

#endif
