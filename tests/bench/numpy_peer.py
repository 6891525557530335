#!/usr/bin/python3
"""Peer benchmark for `qscope bench --npy FILE`: the same load + statistics with numpy.

Runs with Debian's numpy (python3-numpy), single-threaded BLAS settings do not matter here (no
matrix products).  Reports min and median over repeats, in M elements/s, like qscope bench.
Statistics computed: min, max, mean, std, absmax, Pearson kurtosis, zero and 6-sigma outlier
fractions and 9 exact percentiles -- what `qscope import` computes per tensor (qscope also hashes
the bytes and writes the database rows, which numpy does not).
"""
import statistics, sys, time
import numpy as np

path = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
P = [0.1, 1, 5, 25, 50, 75, 95, 99, 99.9]

def run():
    x = np.load(path)
    f = x[np.isfinite(x)].astype(np.float64)
    mean = f.mean(); d = f - mean; m2 = (d * d).mean(); m4 = (d ** 4).mean()
    out = (f.min(), f.max(), mean, np.sqrt(m2), np.abs(f).max(), m4 / (m2 * m2),
           (f == 0).mean(), (np.abs(d) > 6 * np.sqrt(m2)).mean(), np.percentile(f, P))
    return x.size, out

times = []
for _ in range(reps):
    t0 = time.perf_counter(); n, _ = run(); times.append(time.perf_counter() - t0)
print(f"numpy {np.__version__} load+statistics: best {n / min(times) / 1e6:.1f}  median {n / statistics.median(times) / 1e6:.1f}  M elem/s ({n} elements, {reps} runs)")
