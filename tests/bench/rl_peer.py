#!/usr/bin/python3
"""Peer for `qscope bench rl`: the obvious Python way to do the same work on a log of the same shape
(256 sequences x 1000 tokens per step, JSONL with lp_rollout / lp_train / entropy arrays):
  1. parse: json.loads of every line;
  2. import: parse + sqlite3 executemany into the same rl_token table, one transaction;
  3. diagnostics: numpy per step (k1, k3, chi2, token ESS, sequence ESS) from the stored rows.
Usage: /usr/bin/python3 tests/bench/rl_peer.py [STEPS]   (default 4 steps = 1,024,000 tokens)"""
import json
import os
import sqlite3
import sys
import tempfile
import time

import numpy as np

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
SEQS, T = 256, 1000


def write_log(path):
    rng = np.random.default_rng(1)
    with open(path, "w") as f:
        f.write('{"schema":"mmlog-v1","framework":"peer"}\n')
        for st in range(STEPS):
            for i in range(SEQS):
                lr = np.log(rng.random(T)) * 0.7
                lt = np.minimum(0, lr + (rng.random(T) - 0.5) * 0.1)
                en = rng.random(T) * 2
                f.write(json.dumps({"step": st, "seq_id": f"{st}:{i}", "group_id": f"{st}:{i // 8}",
                                    "reward": float(i % 2), "adv": 0.5,
                                    "lp_rollout": [float(f"{x:.8g}") for x in lr],
                                    "lp_train": [float(f"{x:.8g}") for x in lt],
                                    "entropy": [float(f"{x:.4g}") for x in en]}) + "\n")


def best_median(fn, reps=3):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[0], ts[len(ts) // 2]


def main():
    d = tempfile.mkdtemp()
    log = os.path.join(d, "log.jsonl")
    write_log(log)
    ntok = STEPS * SEQS * T

    def parse():
        with open(log) as f:
            next(f)
            for line in f:
                json.loads(line)

    def importer():
        db = os.path.join(d, "p.db")
        for p in (db, db + "-wal", db + "-shm"):
            if os.path.exists(p):
                os.remove(p)
        c = sqlite3.connect(db)
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("CREATE TABLE rl_token(run_id INTEGER, step INTEGER, seq INTEGER, pos INTEGER, token_id INTEGER,"
                  " lp_rollout REAL NOT NULL, lp_train REAL NOT NULL, advantage REAL, reward REAL, grp INTEGER,"
                  " entropy REAL, mask INTEGER NOT NULL DEFAULT 1, PRIMARY KEY(run_id, step, seq, pos)) WITHOUT ROWID")
        groups = {}
        with open(log) as f:
            next(f)
            seq_in_step = {}
            rows = []
            for line in f:
                o = json.loads(line)
                st = o["step"]
                s = seq_in_step.get(st, 0)
                seq_in_step[st] = s + 1
                g = groups.setdefault(o["group_id"], len(groups))
                for t, (a, b, e) in enumerate(zip(o["lp_rollout"], o["lp_train"], o["entropy"])):
                    rows.append((1, st, s, t, None, a, b, o["adv"], o["reward"], g, e, 1))
        c.executemany("INSERT INTO rl_token VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        c.commit()
        c.close()

    def diagnostics():
        c = sqlite3.connect(os.path.join(d, "p.db"))
        for (st,) in c.execute("SELECT DISTINCT step FROM rl_token").fetchall():
            a = np.array(c.execute("SELECT seq, lp_rollout, lp_train FROM rl_token WHERE step=? ORDER BY seq, pos",
                                   (st,)).fetchall())
            d_ = np.clip(a[:, 2] - a[:, 1], -20, 20)
            w = np.exp(d_)
            _ = (np.mean(-d_), np.mean(w - 1 - d_), np.mean(w * w) - 1, w.sum() ** 2 / (len(w) * np.sum(w * w)))
            D = np.bincount(a[:, 0].astype(int), weights=d_)
            rho = np.exp(np.clip(D, -20, 20))
            _ = rho.sum() ** 2 / (len(rho) * np.sum(rho * rho))
        c.close()

    res = [("parse JSONL (json.loads)", best_median(parse)),
           ("import JSONL (json.loads + sqlite3 executemany, one transaction)", best_median(importer)),
           ("diagnostics per step (sqlite3 read + numpy)", best_median(diagnostics))]
    print(f"peer: Python {sys.version.split()[0]}, numpy {np.__version__}, sqlite {sqlite3.sqlite_version}; {ntok} tokens")
    for name, (b, m) in res:
        print(f"{name:70s} {ntok / b / 1e6:8.2f} {ntok / m / 1e6:8.2f} M tokens/s")
    for p in os.listdir(d):
        os.remove(os.path.join(d, p))
    os.rmdir(d)


main()
