"""Minimal, independent GGUF reader/writer for the LLM cross-check (stdlib + numpy only).

Written from the GGUF spec (ggml docs/gguf.md) and ggml-common.h block layouts, without reading
qscope's C code, so that the C loader and this reader check each other.  Supports the tensor types
the SmolLM2 file uses (F32, F16, Q8_0, Q4_1) plus Q4_0 and BF16, and writes the same types.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i", T_F32: "<f",
           T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 3, 8, 30
_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q4_0: (32, 18), GGML_Q4_1: (32, 20), GGML_Q8_0: (32, 34),
          GGML_BF16: (1, 2)}


def bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (NaN-free input)."""
    u = np.asarray(x, np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


class Reader:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        self.p = 0
        assert self.buf[:4] == GGUF_MAGIC, "not a GGUF file"
        self.p = 4
        ver, = self._u("<I")
        assert ver in (2, 3), ver
        nt, nkv = self._u("<QQ")
        self.kv = {}
        for _ in range(nkv):
            k = self._str()
            t, = self._u("<I")
            self.kv[k] = self._val(t)
        self.infos = []
        for _ in range(nt):
            name = self._str()
            nd, = self._u("<I")
            ne = self._u("<%dQ" % nd)
            typ, off = self._u("<IQ")
            self.infos.append((name, ne, typ, off))
        align = self.kv.get("general.alignment", 32)
        self.data0 = (self.p + align - 1) // align * align

    def _u(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.p)
        self.p += struct.calcsize(fmt)
        return v

    def _str(self):
        n, = self._u("<Q")
        s = self.buf[self.p:self.p + n].decode("utf-8", "replace")
        self.p += n
        return s

    def _val(self, t):
        if t == T_STR:
            return self._str()
        if t == T_ARR:
            et, n = self._u("<IQ")
            return [self._val(et) for _ in range(n)]
        return self._u(_SCALAR[t])[0]

    def tensor(self, name):
        """The tensor as a float32 numpy array of shape reversed(ne) (PyTorch order)."""
        for nm, ne, typ, off in self.infos:
            if nm == name:
                break
        else:
            raise KeyError(name)
        n = int(np.prod(ne))
        blk, bsz = _BLOCK[typ]
        raw = np.frombuffer(self.buf, np.uint8, n // blk * bsz, self.data0 + off)
        return dequant(raw, typ, n).reshape(tuple(reversed(ne)))

    def has(self, name):
        return any(nm == name for nm, _, _, _ in self.infos)


def dequant(raw, typ, n):
    if typ == GGML_F32:
        return raw.view("<f4").astype(np.float32).copy()
    if typ == GGML_F16:
        return raw.view("<f2").astype(np.float32)
    if typ == GGML_BF16:
        return bf16_to_f32(raw.view("<u2"))
    blk, bsz = _BLOCK[typ]
    b = raw.reshape(-1, bsz)
    if typ == GGML_Q8_0:
        d = b[:, :2].copy().view("<f2").astype(np.float32)
        q = b[:, 2:].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    if typ in (GGML_Q4_0, GGML_Q4_1):
        d = b[:, :2].copy().view("<f2").astype(np.float32)
        qs = b[:, 4:] if typ == GGML_Q4_1 else b[:, 2:]
        lo = (qs & 0x0F).astype(np.float32)
        hi = (qs >> 4).astype(np.float32)
        q = np.concatenate([lo, hi], axis=1)  # element j in the low nibble, j+16 in the high nibble
        if typ == GGML_Q4_1:
            m = b[:, 2:4].copy().view("<f2").astype(np.float32)
            return (d * q + m).reshape(-1)
        return (d * (q - 8.0)).reshape(-1)
    raise ValueError("unsupported ggml type %d" % typ)


def quant(x, typ):
    """Quantize a float32 vector (length a multiple of 32 for block types) to raw block bytes,
    the way ggml's reference quantizers do (round to nearest)."""
    x = np.asarray(x, np.float32).reshape(-1)
    if typ == GGML_F32:
        return x.astype("<f4").tobytes()
    if typ == GGML_F16:
        return x.astype("<f2").tobytes()
    if typ == GGML_BF16:
        return bf16_bits(x).astype("<u2").tobytes()
    b = x.reshape(-1, 32)
    out = bytearray()
    for row in b:
        if typ == GGML_Q8_0:
            amax = float(np.max(np.abs(row)))
            d = amax / 127.0
            idv = 1.0 / d if d else 0.0
            q = np.round(row * idv).astype(np.int8)
            out += np.float16(d).tobytes() + q.tobytes()
        elif typ == GGML_Q4_1:
            mn, mx = float(row.min()), float(row.max())
            d = (mx - mn) / 15.0
            idv = 1.0 / d if d else 0.0
            q = np.clip(np.floor((row - mn) * idv + 0.5), 0, 15).astype(np.uint8)
            packed = q[:16] | (q[16:] << 4)
            out += np.float16(d).tobytes() + np.float16(mn).tobytes() + packed.tobytes()
        else:
            raise ValueError("unsupported ggml type %d" % typ)
    return bytes(out)


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []

    def add_kv(self, key, typ, val, elem=None):
        self.kv.append((key, typ, val, elem))

    def add_tensor(self, name, arr, typ):
        arr = np.asarray(arr, np.float32)
        ne = tuple(reversed(arr.shape))
        self.tensors.append((name, ne, typ, quant(arr, typ)))

    @staticmethod
    def _s(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _v(self, typ, val, elem):
        if typ == T_STR:
            return self._s(val)
        if typ == T_ARR:
            return struct.pack("<IQ", elem, len(val)) + b"".join(self._v(elem, v, None) for v in val)
        return struct.pack(_SCALAR[typ], val)

    def write(self, path, align=32):
        h = GGUF_MAGIC + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for k, t, v, el in self.kv:
            h += self._s(k) + struct.pack("<I", t) + self._v(t, v, el)
        off = 0
        offs = []
        for name, ne, typ, data in self.tensors:
            offs.append(off)
            off = (off + len(data) + align - 1) // align * align
        for (name, ne, typ, data), o in zip(self.tensors, offs):
            h += self._s(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
            h += struct.pack("<IQ", typ, o)
        h += b"\0" * ((-len(h)) % align)
        body = bytearray()
        for (name, ne, typ, data), o in zip(self.tensors, offs):
            body += b"\0" * (o - len(body)) + data
        with open(path, "wb") as f:
            f.write(h + bytes(body))
