#!/usr/bin/python3
"""Independent reference forward pass of a llama-architecture GGUF model in PyTorch (float64).

Usage (Debian's interpreter, which has python3-torch; falls back to numpy if torch is missing):
  /usr/bin/python3 tests/llm/torch_ref.py MODEL.gguf IDS [C_LOGITS.npy [TOL]]
    IDS: comma-separated token ids.  Writes nothing; prints max |dlogit| / max |logit|.
    With C_LOGITS.npy (written by `qscope llm logits`), exits 1 unless the relative difference
    max|C - ref| / max|ref| <= TOL (default 1e-4).
  /usr/bin/python3 tests/llm/torch_ref.py MODEL.gguf IDS --save OUT.npy   (reference logits, float32)
  /usr/bin/python3 tests/llm/torch_ref.py MODEL.gguf --ppl IDS_FILE CTX half|all [BOS_ID]
    Perplexity of the ids in IDS_FILE (comma-separated) by llama.cpp's convention: non-overlapping
    chunks of CTX ids (a partial last chunk dropped), BOS_ID (if given) replacing the first id of each
    chunk, the logits at positions CTX/2 .. CTX-2 ("half") or 0 .. CTX-2 ("all") scoring the next id;
    PPL = exp(mean NLL), NLL from a float64 log-softmax.  Prints "ppl P nll N tokens K".

The weights are read by tests/llm/gguf_io.py (its own GGUF parser and Q8_0/Q4_1 dequantizers), the
model is written from the architecture description (RMSNorm, RoPE on adjacent pairs, GQA, SwiGLU),
not from qscope's C code.
"""
import math
import sys
import os

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402

try:
    import torch
    HAVE_TORCH = True
except ImportError:  # numpy fallback, same maths
    HAVE_TORCH = False


def forward(path, ids):
    r = gguf_io.Reader(path)
    kv = r.kv
    arch = kv["general.architecture"]
    nl = kv[arch + ".block_count"]
    dim = kv[arch + ".embedding_length"]
    nh = kv[arch + ".attention.head_count"]
    nkv = kv.get(arch + ".attention.head_count_kv", nh)
    base = kv.get(arch + ".rope.freq_base", 10000.0)
    eps = kv.get(arch + ".attention.layer_norm_rms_epsilon", 1e-5)
    hd = dim // nh
    T = len(ids)
    if HAVE_TORCH:
        W = lambda n: torch.from_numpy(r.tensor(n).astype(np.float64))  # noqa: E731
        emb = W("token_embd.weight")
        out_w = W("output.weight") if r.has("output.weight") else emb
        x = emb[torch.tensor(ids)]

        def rms(v, w):
            return v / torch.sqrt((v * v).mean(-1, keepdim=True) + eps) * w

        pos = torch.arange(T, dtype=torch.float64)[:, None]
        fr = base ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
        ang = pos * fr[None, :]
        cos, sin = torch.cos(ang), torch.sin(ang)

        def rope(v):  # v [T, H, hd], adjacent pairs
            a, b = v[..., 0::2], v[..., 1::2]
            c, s = cos[:, None, :], sin[:, None, :]
            o = torch.empty_like(v)
            o[..., 0::2] = a * c - b * s
            o[..., 1::2] = a * s + b * c
            return o

        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        for l in range(nl):
            p = "blk.%d." % l
            h = rms(x, W(p + "attn_norm.weight"))
            q = rope((h @ W(p + "attn_q.weight").T).view(T, nh, hd))
            k = rope((h @ W(p + "attn_k.weight").T).view(T, nkv, hd))
            v = (h @ W(p + "attn_v.weight").T).view(T, nkv, hd)
            rep = nh // nkv
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
            att = torch.softmax(att, -1)
            o = torch.einsum("hts,shd->thd", att, v).reshape(T, dim)
            x = x + o @ W(p + "attn_output.weight").T
            h = rms(x, W(p + "ffn_norm.weight"))
            g = h @ W(p + "ffn_gate.weight").T
            u = h @ W(p + "ffn_up.weight").T
            x = x + (torch.nn.functional.silu(g) * u) @ W(p + "ffn_down.weight").T
        x = rms(x, W("output_norm.weight"))
        return (x @ out_w.T).numpy()
    # numpy fallback
    W = lambda n: r.tensor(n).astype(np.float64)  # noqa: E731
    emb = W("token_embd.weight")
    out_w = W("output.weight") if r.has("output.weight") else emb
    x = emb[np.array(ids)]
    rms = lambda v, w: v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * w  # noqa: E731
    fr = base ** (-2.0 * np.arange(hd // 2) / hd)
    ang = np.arange(T)[:, None] * fr[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(v):
        a, b = v[..., 0::2], v[..., 1::2]
        o = np.empty_like(v)
        o[..., 0::2] = a * cos - b * sin
        o[..., 1::2] = a * sin + b * cos
        return o

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(nl):
        p = "blk.%d." % l
        h = rms(x, W(p + "attn_norm.weight"))
        q = rope((h @ W(p + "attn_q.weight").T).reshape(T, nh, hd))
        k = np.repeat(rope((h @ W(p + "attn_k.weight").T).reshape(T, nkv, hd)), nh // nkv, axis=1)
        v = np.repeat((h @ W(p + "attn_v.weight").T).reshape(T, nkv, hd), nh // nkv, axis=1)
        att = np.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", att, v).reshape(T, dim)
        x = x + o @ W(p + "attn_output.weight").T
        h = rms(x, W(p + "ffn_norm.weight"))
        g = h @ W(p + "ffn_gate.weight").T
        u = h @ W(p + "ffn_up.weight").T
        x = x + (g / (1 + np.exp(-g)) * u) @ W(p + "ffn_down.weight").T
    x = rms(x, W("output_norm.weight"))
    return x @ out_w.T


def perplexity(path, ids, ctx, mode, bos):
    nll = []
    first = 0 if mode == "all" else ctx // 2
    for c in range(len(ids) // ctx):
        chunk = list(ids[c * ctx:(c + 1) * ctx])
        target = chunk[1:]
        if bos is not None:
            chunk[0] = bos
        lg = np.asarray(forward(path, chunk), dtype=np.float64)
        for pos in range(first, ctx - 1):
            row = lg[pos]
            m = row.max()
            logz = m + math.log(np.exp(row - m).sum())
            nll.append(logz - row[target[pos]])
    mean = sum(nll) / len(nll)
    return math.exp(mean), mean, len(nll)


def main():
    if len(sys.argv) >= 6 and sys.argv[2] == "--ppl":
        ids = [int(t) for t in open(sys.argv[3]).read().replace("\n", "").split(",") if t.strip()]
        bos = int(sys.argv[6]) if len(sys.argv) >= 7 else None
        ppl, mean, n = perplexity(sys.argv[1], ids, int(sys.argv[4]), sys.argv[5], bos)
        print("ppl %.10g nll %.10g tokens %d" % (ppl, mean, n))
        return 0
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    path, ids = sys.argv[1], [int(t) for t in sys.argv[2].split(",")]
    ref = forward(path, ids)
    impl = "torch %s (float64)" % torch.__version__ if HAVE_TORCH else "numpy %s (float64)" % np.__version__
    if len(sys.argv) >= 5 and sys.argv[3] == "--save":
        np.save(sys.argv[4], ref.astype(np.float32))
        print("saved %s logits %s from %s" % (sys.argv[4], ref.shape, impl))
        return 0
    if len(sys.argv) >= 4:
        c = np.load(sys.argv[3]).astype(np.float64)
        tol = float(sys.argv[4]) if len(sys.argv) >= 5 else 1e-4
        if c.shape != ref.shape:
            print("shape mismatch: C %s vs reference %s" % (c.shape, ref.shape))
            return 1
        rel = np.abs(c - ref).max() / np.abs(ref).max()
        same_argmax = (c.argmax(-1) == ref.argmax(-1)).mean()
        print("%s: %d positions x %d vocab, max|C-ref|/max|ref| = %.3g (tol %.1g), argmax agreement %.3f"
              % (impl, ref.shape[0], ref.shape[1], rel, tol, same_argmax))
        return 0 if rel <= tol else 1
    print(impl, ref.shape, ref[:, :5])
    return 0


if __name__ == "__main__":
    sys.exit(main())
