#!/usr/bin/env python3
"""Normalize one output of a base-vs-new run: the side's directory becomes @OUT@, and the values of
timing fields (wall seconds, throughputs, the machine's measured rates) become T, so that what is
left must be bit-identical.  Usage: norm.py SIDE_DIR FILE > NORMALIZED"""
import re, sys
side, path = sys.argv[1], sys.argv[2]
s = open(path, "rb").read().decode("utf-8", "surrogateescape").replace(side, "@OUT@")
NUM = r"-?[0-9][0-9.eE+-]*"
# JSON keys holding timings or measured machine rates
s = re.sub(r'("[a-z_0-9]*(seconds|per_s|_s|gflops|gflop_s|gelem_s|gb_s|p_bf16|p_low|r_vec|bw|ms|us)"\s*:\s*)' + NUM, r"\1T", s)
# table lines: "computed in 0.1 s (0.1 s computing)", "68913.5 tokens/s", measured rates
s = re.sub(r"computed in " + NUM + r" s \(" + NUM + r" s computing\)", "computed in T s (T s computing)", s)
s = re.sub(NUM + r"( ?(tokens/s|GFLOP/s|Gelem/s|GB/s|tok/s))", r"T\1", s)
sys.stdout.write(s.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape"))
