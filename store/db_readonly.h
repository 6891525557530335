/*
** A read-only connection to an existing qscope database, for the ranks > 0 of an MPI job: they read
** tensors and stored results while rank 0 alone writes (app/cli/par.h).
*/
#ifndef QS_DB_READONLY_H
#define QS_DB_READONLY_H

#include "db.h"

/* Open path read-only; it must exist and be at this qscope's schema version (no migration, no
** journal-mode change).  NULL with a message on failure. */
qs_db *qs_db_open_readonly(const char *path, qs_err *e);

#endif
