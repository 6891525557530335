#!/usr/bin/env python3
"""Peer benchmark for `qscope bench tokenize --peer tokenizers`: Hugging Face `tokenizers` on the same
text and tokenizer.

  python3 tests/bench/tokenizers_peer.py [--reps N] (--model MODEL.gguf | --tokenizer tokenizer.json) FILE...

The files are concatenated as bytes (as qscope does) and decoded as UTF-8 (invalid bytes replaced:
the ids then differ from qscope's, which the bench reports).  The tokenizer is rebuilt from the GGUF as
tests/llm/hf_tokenize.py does (SmolLM2's pre-tokenizer, control tokens special), or read from the
tokenizer.json (of a model directory when a directory is given).  Three runs, each in its own process because rayon's pool is fixed at its first use:
`encode` of the whole text with RAYON_NUM_THREADS=1 ("single"), and `encode_batch` of its paragraphs
(cut after each blank line; the pieces concatenate to the text) with RAYON_NUM_THREADS=1 ("batch_1")
and with rayon's default threads ("batch").  Prints one JSON
line: best and median wall seconds of --reps runs, the median CPU seconds (all threads), the token count and an FNV-1a 64 hash of the ids (int32
little-endian, as qscope's qs_lopt_ids_hash).  `tokenizers` is found on PYTHONPATH or in build/pyref
(pip install --no-deps --target build/pyref tokenizers); when it is not importable the line says so
under "missing".
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "llm"))
sys.path.append(os.path.join(ROOT, "build", "pyref"))


def fnv(ids):
    h = 14695981039346656037
    for i in ids:
        u = i & 0xFFFFFFFF
        for b in range(4):
            h ^= (u >> (8 * b)) & 0xFF
            h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def load(kind, path):
    from tokenizers import Tokenizer
    if os.path.isdir(path):   # a Hugging Face model directory
        return Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    if kind == "--tokenizer":
        return Tokenizer.from_file(path)
    import hf_tokenize
    return hf_tokenize.build(path)


def paragraphs(text):
    out, at = [], 0
    while at < len(text):
        k = text.find("\n\n", at)
        k = len(text) if k < 0 else k + 2
        out.append(text[at:k])
        at = k
    return out


def child(mode, reps, kind, tok_path, files):
    tok = load(kind, tok_path)
    raw = b"".join(open(f, "rb").read() for f in files)
    text = raw.decode("utf-8", errors="replace")
    times, cpus, ids = [], [], None
    pieces = paragraphs(text) if mode != "single" else None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        if mode == "single":
            ids = tok.encode(text, add_special_tokens=False).ids
        else:
            enc = tok.encode_batch(pieces, add_special_tokens=False)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    r = {"best_s": min(times), "median_s": statistics.median(times), "cpu_median_s": statistics.median(cpus)}
    if mode == "single":
        r.update(threads=1, tokens=len(ids), ids_hash=fnv(ids), bytes=len(raw),
                 replaced=text.count("\ufffd") - raw.count("\ufffd".encode()))
    else:
        n = sum(len(e.ids) for e in enc)
        r.update(threads=int(os.environ.get("RAYON_NUM_THREADS") or os.cpu_count()), pieces=len(pieces), tokens=n)
    print(json.dumps(r))


def main():
    args = sys.argv[1:]
    reps, kind, tok_path, mode = 3, None, None, None
    while args and args[0].startswith("--"):
        a = args.pop(0)
        if a == "--reps":
            reps = int(args.pop(0))
        elif a in ("--model", "--tokenizer"):
            kind, tok_path = a, args.pop(0)
        elif a == "--child":
            mode = args.pop(0)
        else:
            sys.exit("tokenizers_peer.py: unknown option " + a)
    if not kind or not args:
        sys.exit(__doc__)
    if mode:
        return child(mode, reps, kind, tok_path, args)
    try:
        import tokenizers
        if kind == "--model" and not os.path.isdir(tok_path):
            import numpy  # noqa: F401  (tests/llm/gguf_io.py reads the GGUF with it)
    except ImportError as ex:
        print(json.dumps({"missing": "%s is not importable (pip install --no-deps --target build/pyref %s, or "
                                     "PYTHONPATH)" % (ex.name, ex.name)}))
        return
    out = {"version": tokenizers.__version__, "peer": "huggingface tokenizers"}
    base = [sys.executable, os.path.abspath(__file__), "--reps", str(reps), kind, tok_path]
    for key, mode, env in (("single", "single", {"RAYON_NUM_THREADS": "1"}), ("batch_1", "batch", {"RAYON_NUM_THREADS": "1"}),
                           ("batch", "batch", {})):
        e = dict(os.environ, **env)
        if not env:
            e.pop("RAYON_NUM_THREADS", None)
        p = subprocess.run(base[:2] + ["--child", mode] + base[2:] + args, env=e, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit("tokenizers_peer.py: %s run failed: %s" % (mode, (p.stderr.strip().splitlines() or ["?"])[-1]))
        out[key] = json.loads(p.stdout.strip().splitlines()[-1])
    s = out["single"]
    out.update(tokens=s.pop("tokens"), ids_hash=s.pop("ids_hash"), bytes=s.pop("bytes"), replaced=s.pop("replaced"))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
