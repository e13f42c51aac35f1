"""fhwire.py -- the fhrun bootstrap wire protocol (firehose/boot/bootstrap.h,
boot_wire.h) in Python, for the tests in tests/boot/ that play a rank, a
launcher or something in between (they find it through PYTHONPATH, set by
lib.sh).  Kept deliberately small: the handshake messages, the MAC, and a
1-rank "launcher" loop that answers collectives.
"""
import hashlib
import hmac
import os
import struct

MAGIC = b"FHB2"          # FH_BOOT_MAGIC, little-endian on the wire
OLD_MAGIC = b"FHB1"      # the protocol that sent the job key in clear
NONCE = 32               # FH_BOOT_NONCE_BYTES
MACLEN = 32              # FH_BOOT_MAC_BYTES (HMAC-SHA256)
LABEL_RANK = b"fhrun-rank\0"
LABEL_LAUNCHER = b"fhrun-launcher\0"
OP_ALLGATHER, OP_ABORT, OP_FINALIZE = 1, 2, 3
MSG_ALLGATHER = 0x101


def mac(key, label, nonce_r, nonce_l, rank, pid):
    """The handshake MAC: HMAC-SHA256(key, label || nonce_R || nonce_L ||
    rank || pid), label including its NUL (boot_wire.h)."""
    return hmac.new(key, label + nonce_r + nonce_l + struct.pack("<II", rank, pid),
                    hashlib.sha256).digest()


def recv_exact(s, n):
    """n bytes from socket s, or fewer if the peer closed first."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def u32(b):
    return struct.unpack("<I", b)[0] if len(b) == 4 else None


def rank_handshake(s, key, rank, pid=None, magic=MAGIC, proof=None):
    """Plays a rank.  Returns (status, launcher_proof_ok, sent_proof): status
    is None if the launcher closed early; a refusal at the hello stage gives
    (status, False, None).  proof, if given, is sent instead of the right
    MAC (a replay)."""
    pid = os.getpid() if pid is None else pid
    nonce_r = os.urandom(NONCE)
    s.sendall(magic + nonce_r)
    w = recv_exact(s, 4)
    if w != MAGIC:
        return u32(w), False, None
    nonce_l = recv_exact(s, NONCE)
    mine = mac(key, LABEL_RANK, nonce_r, nonce_l, rank, pid)
    if proof is None:
        proof = mine
    s.sendall(struct.pack("<II", rank, pid) + proof)
    status = u32(recv_exact(s, 4))
    if status != 0:
        return status, False, proof
    theirs = recv_exact(s, MACLEN)
    ok = hmac.compare_digest(theirs, mac(key, LABEL_LAUNCHER, nonce_r, nonce_l,
                                         rank, pid))
    return status, ok, proof


def serve_one_rank(c):
    """Answers the collectives of a 1-rank job (an allgather's result is the
    rank's own contribution) until FINALIZE or EOF.  Returns the ops seen."""
    ops = []
    while True:
        w = recv_exact(c, 4)
        if len(w) < 4:
            return ops
        op = u32(w)
        ops.append(op)
        if op == OP_ALLGATHER:
            n = u32(recv_exact(c, 4))
            data = recv_exact(c, n)
            c.sendall(struct.pack("<I", MSG_ALLGATHER) + data)
        else:
            return ops
