#!/usr/bin/env python3
"""Peer benchmark for `qscope bench formats`: ml_dtypes casts on the same input.

Setup (this script installs nothing; ml_dtypes is not packaged in Debian 12):

    pip install --target build/pyref ml_dtypes numpy
    PYTHONPATH=build/pyref taskset -c 0 python3 tests/bench/ml_dtypes_peer.py [options]

Options:
    --n N          number of float32 values (default 16777216, qscope's bench size)
    --reps R       timed runs per figure (default 7; min and median are printed)
    --quick        --n 1048576 --reps 3
    --npy FILE     read the N(0, 0.02^2) values from FILE instead of generating them (for example
                   `qscope gen gaussian --n 16777216 --seed 1 --scale 0.02 -o FILE`); the outliers
                   below are applied either way
    --qscope BIN   qscope binary for the bit-exactness check (default build/qscope next to this
                   tree); `--qscope none` skips the check

Input: what app/cli/bench_formats.c feeds qscope -- Gaussian values, seed 1, scale 0.02, and every
997th value (index 0, 997, 1994, ...) multiplied by 50.  The generator is qscope's own
(datasets/gen.c: counter-based SplitMix64 uniforms, Box-Muller cosine branch, computed in float64
and rounded to float32) rewritten with numpy, so both programs cast the same distribution; numpy's
log/cos may differ from glibc's in the last bit of a float64, which can flip the float32 rounding of
a rare value.  The script prints how many values differ from `qscope gen` when the binary is there.

What is timed, single thread (numpy casts do not use threads), each after one warm-up run:
    fake-quantize    x.astype(T).astype(float32)
    encode           x.astype(T)                      (the packed codes, one byte or two each)
    decode           codes.astype(float32)
and the same three into preallocated arrays (np.copyto(..., casting="unsafe")), which leaves out
the allocation and page faults of a fresh 16M-element result, as qscope's bench does (its output
buffers are allocated once).  Formats: bfloat16, float16, float8_e4m3fn, float8_e5m2,
float6_e3m2fn, float6_e2m3fn, float4_e2m1fn (one code per byte in ml_dtypes; qscope's encode
output layout may differ).  Figures are M elem/s, min-time ("best") and median.

Bit-exactness: 10000 input values plus 10000 of them rescaled by 2^k (k uniform in [-140, 24], so
float32 subnormals and overflow are hit) plus +-0, +-inf, nan go through `qscope quant -f F` (stdin,
one %.9g value a line) and through astype(T).astype(float32); the float32 results must be equal
bit for bit (any NaN equals any NaN; qscope prints NaN without its payload).
"""
import os, statistics, subprocess, sys, time

import numpy as np
import ml_dtypes

FORMATS = [  # (qscope name, ml_dtypes type name)
    ("bf16", "bfloat16"),
    ("fp16", "float16"),
    ("fp8_e4m3", "float8_e4m3fn"),
    ("fp8_e5m2", "float8_e5m2"),
    ("fp6_e3m2", "float6_e3m2fn"),
    ("fp6_e2m3", "float6_e2m3fn"),
    ("fp4_e2m1", "float4_e2m1fn"),
]

M64 = (1 << 64) - 1


def mix64_int(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix64(z):  # uint64 arrays; numpy's uint64 products wrap modulo 2^64
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def qscope_gaussian(n, seed, scale, chunk=1 << 20):
    """datasets/gen.c qs_gen_fill(QS_GEN_GAUSSIAN) in numpy."""
    key = mix64_int((mix64_int(seed ^ 0x5153636F70654745) + 1 * 0xD1B54A32D192ED03) & M64)  # stream 0
    k = np.uint64(key)
    gamma = np.uint64(0x9E3779B97F4A7C15)
    out = np.empty(n, np.float32)
    with np.errstate(over="ignore"):
        for s in range(0, n, chunk):
            i = np.arange(s, min(n, s + chunk), dtype=np.uint64)
            def u(ctr):
                bits = mix64(mix64(k + ctr * gamma) ^ k)
                return ((bits >> np.uint64(11)) | np.uint64(1)).astype(np.float64) * 2.0 ** -53
            c = i * np.uint64(32)
            z = np.sqrt(-2.0 * np.log(u(c))) * np.cos(6.283185307179586476925286766559 * u(c + np.uint64(1)))
            out[s:s + len(i)] = (scale * z).astype(np.float32)
    return out


def add_outliers(x):
    x[::997] *= np.float32(50)
    return x


def timeit(fn, reps):
    fn()  # warm-up
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); t.append(time.perf_counter() - t0)
    return min(t), statistics.median(t)


def rate(n, tt):
    return n / tt[0] / 1e6, n / tt[1] / 1e6


def check_against_qscope(qbin, x):
    rng = np.random.default_rng(1)
    a = x[:10000].copy()
    b = (x[:10000].astype(np.float64) * np.exp2(rng.integers(-140, 25, 10000))).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    sample = np.concatenate([a, b, specials])
    text = "".join("%.9g\n" % v for v in sample.astype(np.float64))
    lines = []
    for qname, tname in FORMATS:
        T = np.dtype(getattr(ml_dtypes, tname)) if tname != "float16" else np.dtype(np.float16)
        with np.errstate(over="ignore", invalid="ignore"):
            ref = sample.astype(T).astype(np.float32)
        try:
            p = subprocess.run([qbin, "quant", "-f", qname], input=text, capture_output=True, text=True, timeout=120)
        except OSError as e:
            lines.append(f"  {qname:10s} not checked: {e}")
            continue
        if p.returncode != 0:
            lines.append(f"  {qname:10s} not checked: qscope quant exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:160]}")
            continue
        got = np.array([float(s) for s in p.stdout.split()], np.float32)
        if got.size != ref.size:
            lines.append(f"  {qname:10s} not checked: {got.size} outputs for {ref.size} inputs")
            continue
        same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
        bad = np.flatnonzero(~same)
        msg = f"  {qname:10s} vs {tname:14s} {ref.size - bad.size}/{ref.size} bit-identical"
        if bad.size:
            j = bad[0]
            msg += (f"  ({bad.size} differ; first: input {float(sample[j]):.9g} -> qscope {float(got[j]):.9g}, "
                    f"ml_dtypes {float(ref[j]):.9g})")
        lines.append(msg)
    return lines


def main(argv):
    n, reps, npy = 1 << 24, 7, None
    here = os.path.dirname(os.path.abspath(__file__))
    qbin = os.path.normpath(os.path.join(here, "..", "..", "build", "qscope"))
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--quick": n, reps = 1 << 20, 3
        elif a == "--n": i += 1; n = int(argv[i])
        elif a == "--reps": i += 1; reps = int(argv[i])
        elif a == "--npy": i += 1; npy = argv[i]
        elif a == "--qscope": i += 1; qbin = argv[i]
        else:
            print(__doc__, file=sys.stderr); return 2
        i += 1

    if npy:
        x = np.load(npy).astype(np.float32, copy=True).reshape(-1)[:n]
        origin = f"{npy}"
    else:
        x = qscope_gaussian(n, 1, 0.02)
        origin = "numpy rewrite of qscope's generator, seed 1, scale 0.02"
    add_outliers(x)
    x = np.ascontiguousarray(x)
    print(f"{n} float32 values ({origin}; every 997th x50), {reps} runs each, one thread")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}")
    if qbin != "none" and os.access(qbin, os.X_OK) and not npy:
        p = subprocess.run([qbin, "gen", "gaussian", "--n", str(n), "--seed", "1", "--scale", "0.02", "-o", "-"],
                           capture_output=True)
        if p.returncode == 0:
            import io
            g = add_outliers(np.load(io.BytesIO(p.stdout)).astype(np.float32).reshape(-1))
            d = int(np.count_nonzero(g.view(np.uint32) != x.view(np.uint32)))
            print(f"input vs `qscope gen gaussian --seed 1 --scale 0.02` (+ outliers): {n - d}/{n} values bit-identical")

    y = np.empty_like(x)
    t = timeit(lambda: np.copyto(y, x), reps)
    print(f"numpy copy (np.copyto float32, preallocated): {rate(n, t)[0]:.0f} M elem/s (best)")
    hdr = ("FORMAT", "ML_DTYPES TYPE", "FAKEQ best/median", "ENCODE best/median", "DECODE best/median")
    rows_a, rows_p = [], []
    for qname, tname in FORMATS:
        T = np.dtype(getattr(ml_dtypes, tname)) if tname != "float16" else np.dtype(np.float16)
        with np.errstate(over="ignore", invalid="ignore"):
            codes = x.astype(T)
            fq = timeit(lambda: x.astype(T).astype(np.float32), reps)
            en = timeit(lambda: x.astype(T), reps)
            de = timeit(lambda: codes.astype(np.float32), reps)
            cbuf = np.empty(n, T)
            fq_p = timeit(lambda: (np.copyto(cbuf, x, casting="unsafe"), np.copyto(y, cbuf, casting="unsafe")), reps)
            en_p = timeit(lambda: np.copyto(cbuf, x, casting="unsafe"), reps)
            de_p = timeit(lambda: np.copyto(y, codes, casting="unsafe"), reps)
        rows_a.append((qname, tname) + tuple(rate(n, v) for v in (fq, en, de)))
        rows_p.append((qname, tname) + tuple(rate(n, v) for v in (fq_p, en_p, de_p)))
    for title, rows in (("astype (fresh result arrays)", rows_a), ("np.copyto into preallocated arrays", rows_p)):
        print(f"\n{title}:")
        print("%-10s %-15s %21s %21s %21s" % hdr)
        for r in rows:
            print("%-10s %-15s" % r[:2] + "".join(" %10.0f %10.0f" % v for v in r[2:]))
    print("(M elem/s)")

    if qbin != "none":
        print(f"\nbit-exactness against `{qbin} quant -f F` (20005 values: 10000 bench inputs, 10000 rescaled by 2^k, specials):")
        if not os.access(qbin, os.X_OK):
            print(f"  not checked: {qbin} is not an executable")
        else:
            for line in check_against_qscope(qbin, x):
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
