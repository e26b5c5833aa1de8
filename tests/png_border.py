#!/usr/bin/env python3
"""Checks that nothing drawn in a PNG touches its border (a clipped legend or label would).

usage: png_border.py FILE.png [MARGIN]   exit 0 when the outer MARGIN (default 2) pixels are all
background (white or transparent), 1 otherwise (with the first offending pixel), 2 on a PNG this
small decoder does not read (8-bit RGB/RGBA, not interlaced: what rsvg-convert writes).
"""
import struct, sys, zlib

def rows(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n": raise ValueError("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR": hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT": idat += body
        elif kind == b"IEND": break
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace: raise ValueError(f"unsupported PNG {hdr}")
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, out, i = zlib.decompress(idat), w * bpp, bytearray(w * bpp), [], 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(line); prev = line
    return w, h, bpp, out

def main():
    margin = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    try: w, h, bpp, px = rows(sys.argv[1])
    except ValueError as e: print(e); return 2
    def ink(x, y):
        p = px[y][x * bpp:(x + 1) * bpp]
        return not (p[:3] == b"\xff\xff\xff" or (bpp == 4 and p[3] == 0))
    for y in range(h):
        for x in range(w):
            if (x < margin or y < margin or x >= w - margin or y >= h - margin) and ink(x, y):
                print(f"ink at ({x},{y}) of {w}x{h}"); return 1
    print(f"{w}x{h}: border clear"); return 0

sys.exit(main())
