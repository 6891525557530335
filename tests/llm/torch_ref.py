#!/usr/bin/python3
"""Independent reference forward pass of a Llama/Qwen2 model (GGUF file or Hugging Face safetensors
directory) in PyTorch (float64).

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

The weights are read by tests/llm/gguf_io.py (its own GGUF parser and Q8_0/Q4_1/F16/BF16 decoders) or
by read_safetensors below; the model is written from the architecture description (RMSNorm, RoPE on
adjacent pairs for llama GGUF or rotate_half for Hugging Face checkpoints and the other GGUF
architectures, Q/K/V biases, GQA, SwiGLU), not from qscope's C code.  Beyond that core, from each
architecture's description: QK-norm (Qwen3: RMSNorm of each Q and K head, one gain per head channel,
before RoPE); Llama 3's RoPE frequencies (GGUF: divided by rope_freqs; Hugging Face: the rope_scaling
"llama3" wavelength rule, computed here from config.json); a sliding window (Mistral: query t sees keys
s with t - W < s <= t); mixtures of experts (router softmax over all experts, the top k kept,
renormalised for Mixtral and when norm_topk_prob / expert_weights_norm say so, each expert a SwiGLU
FFN; Qwen2-MoE's shared expert times sigmoid(x . gate)).

Gemma 2 / Gemma 3 (GGUF gemma2/gemma3, config.json Gemma2ForCausalLM / Gemma3ForCausalLM), from the
descriptions of transformers' Gemma2/Gemma3 decoder layers and llama.cpp's gemma2/gemma3 graphs:
embeddings times sqrt(dim); RMSNorm weights (1 + w) in Hugging Face checkpoints, w as stored in GGUF
(llama.cpp's converter adds the 1); per layer input norm -> Q/K/V -> [Gemma 3: per-head RMSNorm of Q
and K] -> RoPE (local layers: their own base, 10000 unless given; global: rope_theta, positions divided
by a linear rope_scaling factor) -> scores * scale (query_pre_attn_scalar^-1/2 in Hugging Face configs,
1/sqrt(head_dim) in GGUF) -> [cap * tanh(s / cap)] -> causal mask, on local layers also keys more than
sliding_window - 1 positions back masked (local: layer l with l % pattern < pattern - 1; pattern 2 for
Gemma 2, 6 for Gemma 3, or layer_types) -> softmax -> P V -> O -> post-attention RMSNorm -> residual;
pre-FFN RMSNorm -> gelu_tanh(gate) * up -> down -> post-FFN RMSNorm -> residual; final norm, tied
output, [final cap * tanh(logit / cap)].
"""
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402

try:
    import torch
    HAVE_TORCH = True
except ImportError:  # numpy fallback, same maths
    HAVE_TORCH = False


def read_safetensors(path):
    """{name: float32 array} of a safetensors file (F32, F16, BF16), from the format description."""
    with open(path, "rb") as f:
        buf = f.read()
    n, = struct.unpack_from("<Q", buf, 0)
    hdr = json.loads(buf[8:8 + n])
    out = {}
    for name, d in hdr.items():
        if name == "__metadata__":
            continue
        b, e = d["data_offsets"]
        raw = buf[8 + n + b:8 + n + e]
        if d["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif d["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        elif d["dtype"] == "BF16":
            a = gguf_io.bf16_to_f32(np.frombuffer(raw, "<u2"))
        else:
            raise ValueError(d["dtype"])
        out[name] = a.reshape(d["shape"])
    return out


HF = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight",
      "output_norm.weight": "model.norm.weight", "attn_norm.weight": "input_layernorm.weight",
      "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
      "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
      "ffn_norm.weight": "post_attention_layernorm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
      "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
      "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
      "attn_v.bias": "self_attn.v_proj.bias", "attn_q_norm.weight": "self_attn.q_norm.weight",
      "attn_k_norm.weight": "self_attn.k_norm.weight", "ffn_gate_inp.weight": "mlp.gate.weight",
      "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
      "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
      "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
      "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight"}
HF_EXPERT = {"qwen": ("mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight", "mlp.experts.%d.down_proj.weight"),
             "mixtral": ("block_sparse_moe.experts.%d.w1.weight", "block_sparse_moe.experts.%d.w3.weight",
                         "block_sparse_moe.experts.%d.w2.weight")}
# Gemma's Hugging Face layer norms: post_attention_layernorm is the sandwich norm on the attention output
HF_GEMMA = dict(HF, **{"ffn_norm.weight": "pre_feedforward_layernorm.weight",
                       "post_attention_norm.weight": "post_attention_layernorm.weight",
                       "post_ffw_norm.weight": "post_feedforward_layernorm.weight"})


def hf_llama3_inv_freq(base, hd, rs):
    """Hugging Face's llama3 rope_scaling: inverse frequencies of wavelength above
    original_max_position_embeddings / low_freq_factor divided by factor, below .. / high_freq_factor
    kept, and between them interpolated with smooth = (orig / wavelength - low) / (high - low)."""
    inv = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    f, lo, hi, orig = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    wl = 2 * math.pi / inv
    out = np.where(wl > orig / lo, inv / f, inv)
    smooth = (orig / wl - lo) / (hi - lo)
    mid = (wl >= orig / hi) & (wl <= orig / lo)
    return np.where(mid, (1 - smooth) * inv / f + smooth * inv, out)


def gemma_hp(c, gguf, arch):
    """The Gemma fields of hp from config.json (gguf False) or GGUF metadata c."""
    g2 = arch == "gemma2"
    if gguf:
        k = lambda n, d=None: c.get(arch + "." + n, d)  # noqa: E731
        nl = c[arch + ".block_count"]
        pat = k("attention.sliding_window_pattern", 2 if g2 else 6)
        local = [l % pat < pat - 1 for l in range(nl)]
        win = k("attention.sliding_window", 4096 if g2 else 0)
        hd = k("attention.key_length") or c[arch + ".embedding_length"] // c[arch + ".attention.head_count"]
        lin = k("rope.scaling.factor", 1.0) if k("rope.scaling.type") == "linear" else 1.0
        return dict(gemma=True, scale=hd ** -0.5, attn_cap=k("attn_logit_softcapping", 50.0 if g2 else 0.0),
                    final_cap=k("final_logit_softcapping", 30.0 if g2 else 0.0), local=local if win else [False] * nl,
                    win=win, base_local=k("rope.freq_base_swa", k("rope.freq_base", 10000.0) if g2 else 10000.0),
                    lin=lin, qk_norm=not g2, plus1=False)
    nl = c["num_hidden_layers"]
    if "layer_types" in c:
        local = [t == "sliding_attention" for t in c["layer_types"]]
    else:
        pat = c.get("sliding_window_pattern", 2 if g2 else 6)
        local = [l % pat < pat - 1 for l in range(nl)]
    rs = c.get("rope_scaling") or {}
    return dict(gemma=True, scale=c.get("query_pre_attn_scalar", 256) ** -0.5,
                attn_cap=c.get("attn_logit_softcapping", 50.0 if g2 else None) or 0.0,
                final_cap=c.get("final_logit_softcapping", 30.0 if g2 else None) or 0.0,
                local=local, win=c.get("sliding_window", 4096),
                base_local=c.get("rope_local_base_freq", c.get("rope_theta", 10000.0) if g2 else 10000.0),
                lin=rs.get("factor", 1.0) if rs.get("rope_type", rs.get("type")) == "linear" else 1.0,
                qk_norm=not g2, plus1=True)


def load(path):
    """Hyper-parameters and a weight getter by GGUF name (None when absent).

    GGUF: llama (RoPE on adjacent pairs: llama.cpp's converter permuted Q/K) or qwen2 (rotate_half,
    Q/K/V biases).  Hugging Face directory (config.json, model.safetensors or an index of shards):
    rotate_half RoPE (the checkpoint's own convention), biases when present, lm_head or tied."""
    if os.path.isdir(path):
        with open(os.path.join(path, "config.json")) as f:
            c = json.load(f)
        idx = os.path.join(path, "model.safetensors.index.json")
        files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
        T = {}
        for fn in files:
            T.update(read_safetensors(os.path.join(path, fn)))
        hp = dict(nl=c["num_hidden_layers"], dim=c["hidden_size"], nh=c["num_attention_heads"],
                  nkv=c.get("num_key_value_heads", c["num_attention_heads"]), base=c.get("rope_theta", 10000.0),
                  eps=c.get("rms_norm_eps", 1e-6), neox=True, hd=c.get("head_dim"))
        gem = c.get("model_type") in ("gemma2", "gemma3_text")
        if gem:
            hp.update(gemma_hp(c, False, "gemma2" if c["model_type"] == "gemma2" else "gemma3"))
        names = HF_GEMMA if gem else dict(HF)
        mt = c.get("model_type")
        if mt in ("mistral", "mixtral"):
            hp["swa"] = c.get("sliding_window") or 0
        rs = c.get("rope_scaling")
        if rs and not gem:
            assert rs.get("rope_type", rs.get("type")) == "llama3", rs
            hp["inv_freq"] = hf_llama3_inv_freq(hp["base"], hp["hd"] or hp["dim"] // hp["nh"], rs)
        ne = c.get("num_experts") or c.get("num_local_experts") or 0
        if ne:
            enames = HF_EXPERT["mixtral" if mt == "mixtral" else "qwen"]
            hp["moe"] = dict(E=ne, K=c["num_experts_per_tok"], norm=True if mt == "mixtral" else c.get("norm_topk_prob", False),
                             expert=lambda l, e, i: T["model.layers.%d.%s" % (l, enames[i] % e)])
            if mt == "mixtral":
                names["ffn_gate_inp.weight"] = "block_sparse_moe.gate.weight"

        def get(n):
            if n.startswith("blk."):
                _, l, rest = n.split(".", 2)
                key = "model.layers.%s.%s" % (l, names[rest])
            else:
                key = names[n]
            if n == "output.weight" and c.get("tie_word_embeddings", False):
                return None
            return T.get(key)
        return hp, get
    r = gguf_io.Reader(path)
    kv = r.kv
    arch = kv["general.architecture"]
    nh = kv[arch + ".attention.head_count"]
    hp = dict(nl=kv[arch + ".block_count"], dim=kv[arch + ".embedding_length"], nh=nh,
              nkv=kv.get(arch + ".attention.head_count_kv", nh), base=kv.get(arch + ".rope.freq_base", 10000.0),
              eps=kv.get(arch + ".attention.layer_norm_rms_epsilon", 1e-5), neox=arch != "llama",
              hd=kv.get(arch + ".attention.key_length"))
    if arch in ("gemma2", "gemma3"):
        hp.update(gemma_hp(kv, True, arch))
        return hp, lambda n: r.tensor(n) if r.has(n) else None
    hp["swa"] = kv.get(arch + ".attention.sliding_window", 0)
    hd = hp["hd"] or hp["dim"] // nh
    if r.has("rope_freqs.weight"):  # llama.cpp: frequency i divided by rope_freqs[i]
        hp["inv_freq"] = hp["base"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd) / r.tensor("rope_freqs.weight")
    if kv.get(arch + ".expert_count"):
        stacked = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
        hp["moe"] = dict(E=kv[arch + ".expert_count"], K=kv[arch + ".expert_used_count"],
                         norm=kv.get(arch + ".expert_weights_norm", arch != "qwen2moe"),
                         expert=lambda l, e, i: r.tensor("blk.%d.%s.weight" % (l, stacked[i]))[e])
    return hp, lambda n: r.tensor(n) if r.has(n) else None


def forward(path, ids):
    hp, get = load(path)
    nl, dim, nh, nkv, base, eps, neox = (hp[k] for k in ("nl", "dim", "nh", "nkv", "base", "eps", "neox"))
    hd = hp.get("hd") or dim // nh
    half = hd // 2
    T = len(ids)
    if HAVE_TORCH:
        xp = torch
        W = lambda n: None if get(n) is None else torch.from_numpy(np.array(get(n), np.float64))  # noqa: E731
        arange = lambda n: torch.arange(n, dtype=torch.float64)  # noqa: E731
        repeat = lambda v, k: v.repeat_interleave(k, dim=1)  # noqa: E731
        silu = torch.nn.functional.silu
        softmax = lambda a: torch.softmax(a, -1)  # noqa: E731
        idx = torch.tensor(ids)
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        cat = lambda a, b: torch.cat([a, b], -1)  # noqa: E731
        stack = lambda a, b: torch.stack([a, b], -1).reshape(a.shape[:-1] + (2 * a.shape[-1],))  # noqa: E731
    else:
        xp = np
        W = lambda n: None if get(n) is None else np.array(get(n), np.float64)  # noqa: E731
        arange = lambda n: np.arange(n, dtype=np.float64)  # noqa: E731
        repeat = lambda v, k: np.repeat(v, k, axis=1)  # noqa: E731
        silu = lambda g: g / (1 + np.exp(-g))  # noqa: E731
        def softmax(a):  # noqa: E306
            a = np.exp(a - a.max(-1, keepdims=True))
            return a / a.sum(-1, keepdims=True)
        idx = np.array(ids)
        mask = np.triu(np.full((T, T), -np.inf), 1)
        cat = lambda a, b: np.concatenate([a, b], -1)  # noqa: E731
        stack = lambda a, b: np.stack([a, b], -1).reshape(a.shape[:-1] + (2 * a.shape[-1],))  # noqa: E731
    emb = W("token_embd.weight")
    out_w = W("output.weight")
    if out_w is None:
        out_w = emb
    x = emb[idx]
    gem = hp.get("gemma", False)
    one = 1.0 if gem and hp["plus1"] else 0.0   # Hugging Face Gemma RMSNorm: x / rms * (1 + w)
    rms = lambda v, w: v / xp.sqrt((v * v).mean(-1, keepdims=True) + eps) * (w + one)  # noqa: E731
    cap = lambda v, c: c * xp.tanh(v / c) if c else v  # noqa: E731
    if gem:
        x = x * math.sqrt(dim)
    asf = (lambda a: torch.from_numpy(np.array(a, np.float64))) if HAVE_TORCH else (lambda a: np.array(a, np.float64))  # noqa: E731

    def angles(b, lin=1.0, inv=None):  # inv: Llama 3's frequencies (rope_freqs / rope_scaling)
        fr = b ** (-2.0 * arange(half) / hd) if inv is None else asf(inv)
        ang = (arange(T) / lin)[:, None] * fr[None, :]
        return xp.cos(ang)[:, None, :], xp.sin(ang)[:, None, :]
    tab_global = angles(base, hp.get("lin", 1.0), hp.get("inv_freq"))
    if hp.get("swa"):  # sliding window on every layer (Mistral): query t sees keys s with t - W < s <= t
        tt = np.arange(T)
        mask = mask + asf(np.where(tt[:, None] - tt[None, :] >= hp["swa"], -np.inf, 0.0))
    tab_local = angles(hp["base_local"]) if gem else None
    tpos = arange(T)
    swa_mask = xp.where((tpos[:, None] - tpos[None, :]) >= hp["win"], -math.inf, 0.0) if gem and hp["win"] else 0.0

    def rope(v, tab):  # v [T, H, hd]; angle of pair i = pos * base^(-2i/hd)
        cos, sin = tab
        if neox:  # rotate_half: pair (i, i + hd/2)
            a, b = v[..., :half], v[..., half:]
            return cat(a * cos - b * sin, a * sin + b * cos)
        a, b = v[..., 0::2], v[..., 1::2]  # adjacent pairs (2i, 2i+1)
        return stack(a * cos - b * sin, a * sin + b * cos)

    def lin(h, name):
        y = h @ W(name + ".weight").T
        b = W(name + ".bias")
        return y if b is None else y + b

    gelu = lambda g: 0.5 * g * (1 + xp.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))  # noqa: E731
    moe = hp.get("moe")
    sigmoid = (lambda a: 1 / (1 + xp.exp(-a)))  # noqa: E731

    def ffn(h, gate, up, down):
        return (silu(h @ gate.T) * (h @ up.T)) @ down.T

    def experts(h, l):  # router softmax over all experts, top k, optional renormalisation
        p = softmax(h @ W("blk.%d.ffn_gate_inp.weight" % l).T)
        pn = p.numpy() if HAVE_TORCH else p
        top = np.argsort(-pn, axis=-1, kind="stable")[:, :moe["K"]]
        wt = np.take_along_axis(pn, top, -1)
        if moe["norm"]:
            wt = wt / wt.sum(-1, keepdims=True)
        out = 0 * h
        for e in range(moe["E"]):
            ye = ffn(h, *(asf(moe["expert"](l, e, i)) for i in range(3)))
            out = out + asf((wt * (top == e)).sum(-1))[:, None] * ye
        sg = W("blk.%d.ffn_gate_shexp.weight" % l)
        if sg is not None:  # Qwen2-MoE's shared expert, gated by sigmoid(h . g)
            g = W("blk.%d.ffn_gate_inp_shexp.weight" % l).reshape(-1)
            out = out + sigmoid(h @ g)[:, None] * ffn(h, sg, W("blk.%d.ffn_up_shexp.weight" % l), W("blk.%d.ffn_down_shexp.weight" % l))
        return out

    for l in range(nl):
        p = "blk.%d." % l
        local = gem and hp["local"][l]
        tab = tab_local if local else tab_global
        h = rms(x, W(p + "attn_norm.weight"))
        q, k = lin(h, p + "attn_q").reshape(T, nh, hd), lin(h, p + "attn_k").reshape(T, nkv, hd)
        if W(p + "attn_q_norm.weight") is not None:  # QK-norm: RMSNorm of each head (Qwen3, Gemma 3)
            q, k = rms(q, W(p + "attn_q_norm.weight")), rms(k, W(p + "attn_k_norm.weight"))
        q = rope(q, tab)
        k = repeat(rope(k, tab), nh // nkv)
        v = repeat(lin(h, p + "attn_v").reshape(T, nkv, hd), nh // nkv)
        if gem:
            s = cap(xp.einsum("thd,shd->hts", q, k) * hp["scale"], hp["attn_cap"])
            att = softmax(s + mask + (swa_mask if local else 0.0))
        else:
            att = softmax(xp.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask)
        o = xp.einsum("hts,shd->thd", att, v).reshape(T, nh * hd) @ W(p + "attn_output.weight").T
        x = x + (rms(o, W(p + "post_attention_norm.weight")) if gem else o)
        h = rms(x, W(p + "ffn_norm.weight"))
        act = gelu if gem else silu
        if moe:
            f = experts(h, l)
        else:
            f = (act(h @ W(p + "ffn_gate.weight").T) * (h @ W(p + "ffn_up.weight").T)) @ W(p + "ffn_down.weight").T
        x = x + (rms(f, W(p + "post_ffw_norm.weight")) if gem else f)
    x = rms(x, W("output_norm.weight"))
    out = x @ out_w.T
    if gem:
        out = cap(out, hp["final_cap"])
    return out.numpy() if HAVE_TORCH else out


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
