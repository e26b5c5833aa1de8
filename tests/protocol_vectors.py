#!/usr/bin/env python3
"""docs/PROTOCOL.md section 6 computed from the document's formulas alone, with Python's hashlib
and the `cryptography` package: a second implementation, independent of proto/ and libsodium.
Prints the "label = hex" lines; tests/proto/protocol_vectors_test.cpp checks the same values against the
product. Usage: python3 tests/protocol_vectors.py [version]   (default 6)
       python3 tests/protocol_vectors.py --check docs/PROTOCOL.md [version]
The second form compares every "label = hex" line of the document's section 6 with the values
computed here and exits 1 on any value missing, extra or different (a ctest runs it).
Works with Debian 12's python3-cryptography (38) and with newer releases (43 and later moved
ARC4 and Blowfish to the "decrepit" module)."""
import hashlib, hmac, re, struct, sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
try:
    from cryptography.hazmat.decrepit.ciphers.algorithms import ARC4, Blowfish
except ImportError:
    from cryptography.hazmat.primitives.ciphers.algorithms import ARC4, Blowfish
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

ARGS = sys.argv[1:]
CHECK = ARGS[1] if len(ARGS) >= 2 and ARGS[0] == "--check" else None
if CHECK: ARGS = ARGS[2:]
VERSION = int(ARGS[0]) if ARGS else 6
out = []
def emit(label, b): out.append((label, b.hex()))
def run(start, n=32): return bytes((start + i) & 0xff for i in range(n))
def u64(v): return struct.pack(">Q", v)
def u32(v): return struct.pack(">I", v)
def b2b(n, key, msg): return hashlib.blake2b(msg, digest_size=n, key=key).digest()
def ecb(alg, block): e = Cipher(alg, modes.ECB()).encryptor(); return e.update(block) + e.finalize()
def xor(a, b): return bytes(x ^ y for x, y in zip(a, b))
def raw(pub): return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

# ---- 6.1 records ----
ENC, MAC, IV = run(0x00), run(0x20), run(0x40, 16)
P = b"aesxfer record known-answer test"
def header(n, typ=1): return u32(n) + bytes([typ, 1 if typ == 3 else 0, 0, 0])
def tag(seq, rec, mac): return hmac.new(MAC, u64(seq) + rec, hashlib.sha256).digest() if mac else b""
def pad(p, b): n = b - len(p) % b; return p + bytes([n]) * n
def cbc_iv(alg, b, seq): return ecb(alg, IV[:b - 8] + xor(IV[b - 8:b], u64(seq)))
def rec_cbc(seq, mac=True, typ=1):
    alg = algorithms.AES(ENC[:16]); body = pad(P, 16)
    e = Cipher(alg, modes.CBC(cbc_iv(alg, 16, seq))).encryptor(); ct = e.update(body) + e.finalize()
    r = header(len(ct), typ) + ct; return r + tag(seq, r, mac)
def ctr_block(seq): return IV[:4] + xor(IV[4:12], u64(seq)) + b"\0" * 4
def rec_ctr(seq):
    e = Cipher(algorithms.AES(ENC[:16]), modes.CTR(ctr_block(seq))).encryptor(); ct = e.update(P) + e.finalize()
    r = header(len(ct)) + ct; return r + tag(seq, r, True)
def gcm_nonce(seq): return IV[:4] + xor(IV[4:12], u64(seq))
def rec_gcm(seq): h = header(len(P)); return h + AESGCM(ENC[:16]).encrypt(gcm_nonce(seq), P, h)
def bf_key(seq): e = seq >> 10; return ENC[:16] if e == 0 else b2b(16, ENC, b"aesxfer-v1 rekey" + u64(e))
def rec_bf(seq):
    alg = Blowfish(bf_key(seq)); iv = ecb(alg, xor(IV[:8], u64(seq)))
    e = Cipher(alg, modes.CBC(iv)).encryptor(); ct = e.update(pad(P, 8)) + e.finalize()
    r = header(len(ct)) + ct; return r + tag(seq, r, True)
def rc4_key(seq): return b2b(16, ENC, b"aesxfer-v1 rc4" + u64(seq))
def rec_rc4(seq):
    e = Cipher(ARC4(rc4_key(seq)), mode=None).encryptor(); ks = e.update(b"\0" * (1536 + len(P)))[1536:]
    r = header(len(P)) + xor(P, ks); return r + tag(seq, r, True)
def rec_none(seq, mac): r = header(len(P)) + P; return r + tag(seq, r, mac)
S = 2**32 + 2
emit("aes128-cbc hmac-sha256 seq 0", rec_cbc(0))
emit("aes128-ctr hmac-sha256 seq 0", rec_ctr(0))
emit("aes128-gcm seq 0", rec_gcm(0))
emit("blowfish-cbc hmac-sha256 seq 1023", rec_bf(1023))
emit("blowfish-cbc K_1", bf_key(1024))
emit("blowfish-cbc hmac-sha256 seq 1024", rec_bf(1024))
emit("arcfour K_seq 0", rc4_key(0))
emit("arcfour hmac-sha256 seq 0", rec_rc4(0))
emit("arcfour K_seq 1", rc4_key(1))
emit("arcfour hmac-sha256 seq 1", rec_rc4(1))
emit("none hmac-sha256 seq 0", rec_none(0, True))
emit("none none seq 0", rec_none(0, False))
emit("aes128-cbc none end seq 0", rec_cbc(0, mac=False, typ=3))
emit("aes128-cbc IV seq %d" % S, cbc_iv(algorithms.AES(ENC[:16]), 16, S))
emit("aes128-cbc hmac-sha256 seq %d" % S, rec_cbc(S))
emit("aes128-ctr counter block seq %d" % S, ctr_block(S))
emit("aes128-ctr hmac-sha256 seq %d" % S, rec_ctr(S))
emit("aes128-gcm nonce seq %d" % S, gcm_nonce(S))
emit("aes128-gcm seq %d" % S, rec_gcm(S))

# ---- 6.2 crypto_kx ----
c_sk, s_sk = X25519PrivateKey.from_private_bytes(run(0x40)), X25519PrivateKey.from_private_bytes(run(0x60))
cpk, spk = raw(c_sk.public_key()), raw(s_sk.public_key())
q = c_sk.exchange(X25519PublicKey.from_public_bytes(spk))
assert q == s_sk.exchange(X25519PublicKey.from_public_bytes(cpk))
h = hashlib.blake2b(q + cpk + spk, digest_size=64).digest()
emit("client X25519 public", cpk); emit("server X25519 public", spk); emit("X25519 shared secret", q)
emit("BLAKE2b-512(shared || client public || server public)", h)
emit("client rx", h[:32]); emit("client tx", h[32:]); emit("server rx", h[32:]); emit("server tx", h[:32])
K_c2s, K_s2c = h[32:], h[:32]

# ---- 6.3 handshake ----
cid, hid = Ed25519PrivateKey.from_private_bytes(run(0x00)), Ed25519PrivateKey.from_private_bytes(run(0x20))
cid_pk, hid_pk = raw(cid.public_key()), raw(hid.public_key())
emit("client Ed25519 public", cid_pk); emit("host Ed25519 public", hid_pk)
def frame(t, body): return u32(1 + len(body)) + bytes([t]) + body
ch = frame(1, b"AESXFER1" + bytes([VERSION, 3, 1, 2]) + cpk + run(0x80) + u32(262144))
sh_unsigned = frame(2, b"AESXFER1" + bytes([VERSION, 0]) + spk + run(0xa0) + hid_pk + u32(262144) + b"\0" * 64)[:-64]
th1 = hashlib.sha256(ch + sh_unsigned).digest()
hsig = hid.sign(b"aesxfer-v1 host-sig" + th1)
sh = sh_unsigned + hsig
th2 = hashlib.sha256(ch + sh).digest()
csig = cid.sign(b"aesxfer-v4 client-sig" + th2 + cid_pk)
auth_key, auth_iv = b2b(16, K_c2s, b"aesxfer-v4 auth key" + th2), b2b(16, K_c2s, b"aesxfer-v4 auth iv" + th2)
sealed = AESGCM(auth_key).encrypt(auth_iv[:12], cid_pk + csig, b"")
emit("ClientHello", ch); emit("ServerHello", sh); emit("TH1", th1); emit("host signature", hsig)
emit("TH2", th2); emit("client signature", csig); emit("ClientAuth key", auth_key)
emit("ClientAuth nonce", auth_iv[:12]); emit("ClientAuth", frame(3, sealed))
keys = {}
for d, K in (("C2S", K_c2s), ("S2C", K_s2c)):
    keys[d] = (b2b(32, K, b"aesxfer-v1 enc" + th2), b2b(32, K, b"aesxfer-v1 mac" + th2), b2b(16, K, b"aesxfer-v1 iv" + th2))
    for name, v in zip(("enc", "mac", "iv"), keys[d]): emit(d + " " + name, v)

# ---- 6.4 resume ----
kr = hmac.new(keys["C2S"][0], b"aesxfer-v1 resume" + th2, hashlib.sha256).digest()
emit("K_resume", kr)
for p in (3, 6): emit("D over %d bytes" % p, hmac.new(kr, u64(p) + b"abcdef"[:p], hashlib.sha256).digest())

def documented(path):
    """Section 6's "label = hex" lines (in its code blocks; a value continues on indented lines)."""
    text = open(path, encoding="utf-8").read()
    vals, last, block = {}, None, False
    for line in text[text.index("## 6. Test vectors"):].splitlines():
        if line.startswith("```"): block = not block; continue
        m = re.match(r"^(\S.*?) = ([0-9a-f]+)$", line) if block else None
        if m: last = m.group(1); vals[last] = m.group(2)
        elif block and last and re.match(r"^    [0-9a-f]+$", line): vals[last] += line.strip()
    return vals

if CHECK:
    doc, mine, bad = documented(CHECK), dict(out), 0
    for label in sorted(set(doc) | set(mine)):
        if doc.get(label) != mine.get(label):
            bad += 1
            print("MISMATCH %s\n  document: %s\n  computed: %s" % (label, doc.get(label), mine.get(label)))
    print("%d documented values, %d computed here, %d differ" % (len(doc), len(mine), bad))
    sys.exit(1 if bad or not doc else 0)
for label, hx in out:
    print(label + " = " + "\n    ".join(hx[i:i + 64] for i in range(0, len(hx), 64)))
