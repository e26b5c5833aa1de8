#!/usr/bin/env python3
"""Generates the constant tables of crypto/aes_vperm_ssse3.cpp (vector-permute AES-128).

Technique: M. Hamburg, "Accelerating AES with Vector Permute Instructions" (CHES 2009). The
tables here are derived from scratch as follows and checked exhaustively against the S-box.

GF(2^8) (AES polynomial 0x11b) is viewed as a degree-2 extension of its subfield GF(16). Pick
g with relative trace g + g^16 = 1, so g' = g^16 = g + 1 and n = g * g' lies in GF(16). Every
x is x = i*g + j*g' with i, j in GF(16); the state byte holds i (high nibble) and k = i + j
(low nibble), each written in the GF(2)-basis {1, w, w^2, w^3} of GF(16). The map M taking an
AES byte to this form is GF(2)-linear, so it is two 16-entry lookups (low and high nibble).

Inversion: the norm is N = x * x^16 = n k^2 + i j and x^-1 = x^16 / N = (j g + i g') / N.
With f(k) = 1/(n k):
    io = 1 / (1/i + f(k)) + j = N / (n k + i)
    jo = 1 / (1/j + f(k)) + i = N / (n k + j)
and x^-1 = (1/io) * A + (1/jo) * B with A = n g + (n+1) g', B = (n+1) g + n g'. The output
tables take io and jo and return the image of (1/io)*A and (1/jo)*B under whatever linear map
follows (the affine map's linear part, MixColumns' factor, the basis change M).

Zero handling: 1/0 is "infinity", encoded 0x80. PSHUFB returns 0 for an index with bit 7 set,
which is exactly 1/infinity = 0, and XOR with a nibble keeps bit 7 (infinity + a = infinity).
For x = 0 both 1/i and f(k) are 0x80, their XOR is 0, 1/0 = 0x80 again and the outputs are 0.

Run: python3 scripts/gen_vperm_tables.py > /tmp/t.inc  (the C++ file carries the output inline).
"""


def gmul(a, b):
    p = 0
    while b:
        if b & 1:
            p ^= a
        b >>= 1
        a <<= 1
        if a & 0x100:
            a ^= 0x11B
    return p


def gpow(a, e):
    r = 1
    while e:
        if e & 1:
            r = gmul(r, a)
        a = gmul(a, a)
        e >>= 1
    return r


def ginv(a):
    return 0 if a == 0 else gpow(a, 254)


def aff_lin(x):  # linear part of the S-box's affine map
    r = 0
    for i in range(8):
        bit = 0
        for t in (0, 4, 5, 6, 7):
            bit ^= (x >> ((i + t) % 8)) & 1
        r |= bit << i
    return r


def sbox(x):
    return aff_lin(ginv(x)) ^ 0x63


SBOX = [sbox(x) for x in range(256)]
INV_SBOX = [0] * 256
for _x in range(256):
    INV_SBOX[SBOX[_x]] = _x
AFF_LIN_INV = [0] * 256
for _x in range(256):
    AFF_LIN_INV[aff_lin(_x)] = _x

# The subfield GF(16) and a basis {1, w, w^2, w^3} of it.
w = gpow(0x03, 17)  # 0x03 generates GF(256)*; w has order 15
SUB = [0] * 16  # 4-bit code -> field element
for e in range(16):
    v = 0
    for t in range(4):
        if e >> t & 1:
            v ^= gpow(w, t)
    SUB[e] = v
assert len(set(SUB)) == 16 and all(gpow(v, 16) == v for v in SUB)
CODE = {v: e for e, v in enumerate(SUB)}

g = next(x for x in range(256) if x ^ gpow(x, 16) == 1)
gp = g ^ 1
n = gmul(g, gp)
assert n in CODE

# M: AES byte -> (i << 4) | k.
M = [None] * 256
for i in range(16):
    for j in range(16):
        x = gmul(SUB[i], g) ^ gmul(SUB[j], gp)
        M[x] = (i << 4) | (i ^ j)  # codes add like field elements (same GF(2) basis)
assert None not in M
for a in range(256):  # GF(2)-linear
    for b in (1, 2, 4, 8, 16, 32, 64, 128):
        assert M[a ^ b] == M[a] ^ M[b]
MINV = [0] * 256
for x in range(256):
    MINV[M[x]] = x

INF = 0x80
A = gmul(n, g) ^ gmul(n ^ 1, gp)
B = gmul(n ^ 1, g) ^ gmul(n, gp)


def inv16(e):
    return INF if e == 0 else CODE[ginv(SUB[e])]


INV = [inv16(e) for e in range(16)]
AK = [INF if e == 0 else CODE[ginv(gmul(n, SUB[e]))] for e in range(16)]


def pshufb(table, idx):
    return 0 if idx & 0x80 else table[idx & 15]


def invert(byte):
    """Returns (io, jo) for a state byte, the way the SSSE3 code computes them."""
    i, k = byte >> 4, byte & 15
    j = i ^ k
    ak = pshufb(AK, k)
    iak = pshufb(INV, i) ^ ak
    jak = pshufb(INV, j) ^ ak
    io = pshufb(INV, iak) ^ j
    jo = pshufb(INV, jak) ^ i
    return io, jo


def out_tables(post):
    """Tables u, t with u[io] ^ t[jo] = post(x^-1) for the linear map post."""
    u = [0] * 16
    t = [0] * 16
    for e in range(1, 16):
        r = ginv(SUB[e])
        u[e] = post(gmul(r, A))
        t[e] = post(gmul(r, B))
    return u, t


def check_out(u, t, post):
    for x in range(256):
        io, jo = invert(M[x])
        assert pshufb(u, io) ^ pshufb(t, jo) == post(ginv(x)), hex(x)


tables = {}
# Encryption.
tables["enc_in_lo"] = [M[e] for e in range(16)]
tables["enc_in_hi"] = [M[e << 4] for e in range(16)]
tables["inv"] = INV
tables["inv_nk"] = AK
for name, post in (
    ("enc_1", lambda v: M[aff_lin(v)]),
    ("enc_2", lambda v: M[gmul(2, aff_lin(v))]),
    ("enc_last", aff_lin),
):
    u, t = out_tables(post)
    check_out(u, t, post)
    tables[name + "u"], tables[name + "t"] = u, t
# Decryption: D = M o L^-1 puts InvSubBytes' input into the inversion's form (constant aside).
D = [M[AFF_LIN_INV[y]] for y in range(256)]
tables["dec_in_lo"] = [D[e] for e in range(16)]
tables["dec_in_hi"] = [D[e << 4] for e in range(16)]
for name, c in (("dec_9", 9), ("dec_b", 11), ("dec_d", 13), ("dec_e", 14)):
    post = (lambda cc: lambda v: D[gmul(cc, v)])(c)
    u, t = out_tables(post)
    check_out(u, t, post)
    tables[name + "u"], tables[name + "t"] = u, t
u, t = out_tables(lambda v: v)
check_out(u, t, lambda v: v)
tables["dec_lastu"], tables["dec_lastt"] = u, t

consts = {"enc_const": M[0x63], "dec_const": M[AFF_LIN_INV[0x63]]}

# End-to-end check of the S-box pipelines (with the folded constants).
for x in range(256):
    s = M[x]
    io, jo = invert(s)
    a = pshufb(tables["enc_1u"], io) ^ pshufb(tables["enc_1t"], jo)
    assert MINV[a ^ consts["enc_const"]] == SBOX[x]
    y = x
    d = D[y] ^ consts["dec_const"]
    io, jo = invert(d)
    z = pshufb(tables["dec_lastu"], io) ^ pshufb(tables["dec_lastt"], jo)
    assert z == INV_SBOX[y]


def c_array(vals):
    return "{" + ", ".join("0x%02x" % v for v in vals) + "}"


print("// Generated by scripts/gen_vperm_tables.py; g = 0x%02x, w = 0x%02x, n = 0x%02x." % (g, w, n))
for name, vals in tables.items():
    print("constexpr uint8_t k_%s[16] = %s;" % (name, c_array(vals)))
for name, v in consts.items():
    print("constexpr uint8_t k_%s = 0x%02x;" % (name, v))
