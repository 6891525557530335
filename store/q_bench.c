/*
** Synthetic content for the workbench benchmark (see q_bench.h).
*/
#include "q_bench.h"

#include <stdio.h>

int qs_bench_replicate_tensors(qs_db *db, int ntensors, int base, qs_err *e)
{
    char sql[2048];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < %d) "
             "INSERT INTO tensor(name, source_id, member, dtype, shape, ndim, numel, nbytes, storage, fortran, codec, "
             "data_offset, comp_offset, comp_size, hash, metadata) "
             "SELECT printf('bench:copy%%03d/%%s', k.i, t.name), t.source_id, t.member, t.dtype, t.shape, t.ndim, t.numel, "
             "t.nbytes, t.storage, t.fortran, t.codec, t.data_offset, t.comp_offset, t.comp_size, t.hash, t.metadata "
             "FROM tensor t, k WHERE (k.i - 1) * %d + t.rowid <= %d - %d ORDER BY k.i, t.name",
             (ntensors + base - 1) / base, base, ntensors, base);
    if (ntensors > base && qs_db_exec(db, sql, e)) return -1;
    if (qs_db_exec(db,
                   "INSERT INTO tensor_stats SELECT c.id, s.n_finite, s.n_nan, s.n_inf, s.n_zero, s.min, s.max, s.mean, "
                   "s.std, s.absmax, s.kurtosis, s.zero_frac, s.outlier_frac, s.p0_1, s.p1, s.p5, s.p25, s.p50, s.p75, "
                   "s.p95, s.p99, s.p99_9, s.rows, s.cols, s.row_absmax, s.col_absmax, s.top_channels "
                   "FROM tensor c JOIN tensor o ON o.name = substr(c.name, instr(c.name, '/') + 1) "
                   "JOIN tensor_stats s ON s.tensor_id = o.id WHERE c.name GLOB 'bench:copy*'", e))
        return -1;
    return qs_db_exec(db,
                      "INSERT INTO tensor_chunk SELECT c.id, k.seq, k.data FROM tensor c "
                      "JOIN tensor o ON o.name = substr(c.name, instr(c.name, '/') + 1) "
                      "JOIN tensor_chunk k ON k.tensor_id = o.id WHERE c.name GLOB 'bench:copy*'", e);
}

int qs_bench_rl_runs(qs_db *db, qs_err *e)
{
    return qs_db_exec(db,
                      "INSERT INTO rl_run(id, name, label) VALUES (1, 'bench-a', 'synthetic'), (2, 'bench-b', 'synthetic');"
                      "WITH RECURSIVE s(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM s WHERE v < 63), "
                      "st(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM st WHERE v < 49) "
                      "INSERT INTO rl_token(run_id, step, seq, pos, token_id, lp_rollout, lp_train, mask) "
                      "SELECT r.v, st.v, q.v, p.v, (st.v * 7 + q.v * 13 + p.v) % 1000, -1.0 - ((st.v * 31 + q.v * 17 + p.v * 7) % 100) / 100.0, "
                      "-1.0 - ((st.v * 31 + q.v * 17 + p.v * 7) % 100) / 100.0 + 0.01 * r.v * (((st.v * 13 + q.v * 7 + p.v * 3) % 21) - 10) / 10.0, 1 "
                      "FROM (SELECT 1 AS v UNION SELECT 2) r, st, s q, s p", e);
}
