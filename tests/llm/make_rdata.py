#!/usr/bin/env python3
"""Write a small R lazy-load database (Rdata.rdb + Rdata.rdx) the way R's makeLazyLoadDB does, for
tests of `qscope llm text` and seeds of its fuzz target.  Written from the format description
(R Internals, "Serialization formats" and "Lazy loading"), not from qscope's reader.

  make_rdata.py OUTDIR [--variant ok|latin1|badname|overrun|corrupt|longer|notstr]

.rdx = gzip(serialize(list(variables = list(NAME = c(off, len), ...), references = list(),
                            compressed = TRUE)))
.rdb = per object: 4-byte big-endian uncompressed length + zlib(serialize(object)).
"""
import gzip
import os
import struct
import sys
import zlib

NILVALUE, SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 254, 1, 2, 9, 10, 13, 14, 16, 19
HAS_ATTR, HAS_TAG = 1 << 9, 1 << 10
UTF8, LATIN1, ASCII = 1 << 3, 1 << 2, 1 << 6


def i32(v):
    return struct.pack(">i", v)


def header():
    enc = b"UTF-8"
    return b"X\n" + i32(3) + i32(0x040201) + i32(0x030500) + i32(len(enc)) + enc


def charsxp(s, enc=None):
    if s is None:
        return i32(CHARSXP) + i32(-1)
    b = s if isinstance(s, bytes) else s.encode("utf-8")
    if enc is None:
        enc = ASCII if all(c < 128 for c in b) else UTF8
    return i32(CHARSXP | (enc << 12)) + i32(len(b)) + b


class Syms:
    def __init__(self):
        self.tab = []

    def sym(self, name):
        if name in self.tab:   # reference to an earlier symbol: index packed in the flags
            return i32(((self.tab.index(name) + 1) << 8) | 255)
        self.tab.append(name)
        return i32(SYMSXP) + charsxp(name)


def strsxp(items, enc=None):
    return i32(STRSXP) + i32(len(items)) + b"".join(charsxp(s, enc) for s in items)


def named_list(sy, pairs):
    """VECSXP with a names attribute (a pairlist tagged 'names')."""
    out = i32(VECSXP | HAS_ATTR) + i32(len(pairs)) + b"".join(v for _, v in pairs)
    out += i32(LISTSXP | HAS_TAG) + sy.sym("names") + strsxp([k for k, _ in pairs]) + i32(NILVALUE)
    return out


def intsxp(vals):
    return i32(INTSXP) + i32(len(vals)) + b"".join(i32(v) for v in vals)


BOOKS = [
    ("firstbook", ["FIRST BOOK", "", "by", "A. Writer", "", "Chapter 1", "",
                   "It was a truth   ", "  universally acknowledged, that", "a test needs text.", "", "", None,
                   "\"Quoted,\" she said.", ""]),
    ("second_book", ["Second", "", "One line paragraph.", "Two", "lines."]),
]


def build(variant="ok"):
    books = [(n, list(l)) for n, l in BOOKS]
    if variant == "badname":
        books[1] = ("../evil", books[1][1])
    rdb = b""
    entries = []
    for i, (name, lines) in enumerate(books):
        enc = LATIN1 if (variant == "latin1" and i == 1) else None
        if enc:
            lines = [l.encode("latin-1") if isinstance(l, str) else l for l in lines] + ["Caf\xe9".encode("latin-1")]
        body = header() + (intsxp([1, 2, 3]) if variant == "notstr" and i == 1 else strsxp(lines, enc))
        z = zlib.compress(body, 9)
        declared = len(body) - 1 if variant == "longer" and i == 1 else len(body)
        if variant == "corrupt" and i == 1:
            z = z[:10] + bytes([z[10] ^ 0xFF]) + z[11:]
        blob = struct.pack(">I", declared) + z
        entries.append((name, len(rdb), len(blob) + (1000 if variant == "overrun" and i == 1 else 0)))
        rdb += blob
    sy = Syms()
    variables = named_list(sy, [(n, intsxp([o, l])) for n, o, l in entries])
    root = named_list(sy, [("variables", variables), ("references", i32(VECSXP) + i32(0)),
                           ("compressed", i32(LGLSXP) + i32(1) + i32(1))])
    rdx = gzip.compress(header() + root, 9, mtime=0)
    return rdb, rdx


def main():
    out = sys.argv[1]
    variant = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--variant" else "ok"
    os.makedirs(out, exist_ok=True)
    rdb, rdx = build(variant)
    with open(os.path.join(out, "Rdata.rdb"), "wb") as f:
        f.write(rdb)
    with open(os.path.join(out, "Rdata.rdx"), "wb") as f:
        f.write(rdx)


if __name__ == "__main__":
    main()
