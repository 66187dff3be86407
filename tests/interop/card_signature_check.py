"""Signed Agent Card (--card-signing-key), checked outside Rust.

Starts the server binary with two fresh keys (ES256 and EdDSA, made here with ``cryptography``)
and an extended card, then for every card variant it serves -- the v1.0 card (``A2A-Version:
1.0``), the merged v0.3 card (no version), the pure v0.3 card (``/v1/card``), the extended card
over JSON-RPC v1.0 and v0.3 -- drops ``signatures``, canonicalizes with the ``rfc8785`` package
(an independent RFC 8785 implementation) and verifies every JWS with ``cryptography`` and the
key ``/.well-known/jwks.json`` publishes under the signature's ``kid``. A changed card must not
verify, so the check can fail.

Usage: card_signature_check.py PATH-TO-SERVER-BINARY
Prints ``ok - ...`` / ``FAIL - ...`` lines (counted by run.sh); exits 1 on any failure.
"""

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

EXTENDED = {
    "name": "Extended",
    "description": "for callers who signed in: \u00fcn\u00efcode \u2014 and \"quotes\"",
    "version": "2",
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "s", "name": "S", "description": "a skill", "tags": ["t"]}],
    "capabilities": {"extensions": [{"uri": "urn:x", "params": {"n": 1.5, "big": 1e21, "small": 0.000001}}]},
}


def b64decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64encode(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def http(url, body=None, version=None):
    headers = {"Content-Type": "application/json"}
    if version:
        headers["A2A-Version"] = version
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=10) as r:
        return json.loads(r.read())


def public_key(jwk):
    """The verification key of a JWK, from its members alone."""
    if jwk["kty"] == "EC" and jwk["crv"] == "P-256":
        x, y = (int.from_bytes(b64decode(jwk[c]), "big") for c in ("x", "y"))
        return ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    if jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519":
        return ed25519.Ed25519PublicKey.from_public_bytes(b64decode(jwk["x"]))
    raise ValueError(f"unexpected key {jwk}")


def verify(card, signature, jwks):
    """True when `signature` is a JWS (RFC 7515) over the RFC 8785 form of `card` less `signatures`."""
    header = json.loads(b64decode(signature["protected"]))
    assert header.get("typ") == "JOSE", header
    jwk = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    assert header["alg"] == jwk["alg"], (header, jwk)
    payload = rfc8785.dumps({k: v for k, v in card.items() if k != "signatures"})
    signing_input = f"{signature['protected']}.{b64encode(payload)}".encode()
    raw = b64decode(signature["signature"])
    key = public_key(jwk)
    try:
        if header["alg"] == "ES256":
            r, s = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
            key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hashes.SHA256()))
        elif header["alg"] == "EdDSA":
            key.verify(raw, signing_input)
        else:
            raise ValueError(header["alg"])
    except InvalidSignature:
        return False
    return True


def check_card(name, card, jwks):
    signatures = card.get("signatures") or []
    if len(signatures) != len(jwks["keys"]):
        raise AssertionError(f"{len(signatures)} signatures for {len(jwks['keys'])} keys")
    for signature in signatures:
        if not verify(card, signature, jwks):
            raise AssertionError(f"signature {signature['protected'][:24]}... does not verify")
        tampered = dict(card, description=card["description"] + " (changed)")
        if verify(tampered, signature, jwks):
            raise AssertionError("a changed card verifies")


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        keys = [ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate()]
        args = []
        for i, key in enumerate(keys):
            path = os.path.join(tmp, f"key{i}.pem")
            with open(path, "wb") as f:
                f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
            args += ["--card-signing-key", path]
        extended = os.path.join(tmp, "extended.json")
        with open(extended, "w") as f:
            json.dump(EXTENDED, f)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        log = open(os.path.join(tmp, "server.log"), "w")
        server = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}", "--public-url", base,
                                   "--extended-card", extended, *args], stdout=log, stderr=log)
        try:
            deadline = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline or server.poll() is not None:
                        print("FAIL - [card-signature] the server did not start")
                        return 1
                    time.sleep(0.1)
            jwks = http(f"{base}/.well-known/jwks.json")
            rpc = {"jsonrpc": "2.0", "id": 1}
            variants = [
                ("v1.0 card", lambda: http(f"{base}/.well-known/agent-card.json", version="1.0")),
                ("merged v0.3 card", lambda: http(f"{base}/.well-known/agent-card.json")),
                ("pure v0.3 card", lambda: http(f"{base}/v1/card")),
                ("extended card, JSON-RPC v1.0",
                 lambda: http(base + "/", dict(rpc, method="GetExtendedAgentCard"), version="1.0")["result"]),
                ("extended card, v0.3 agent/getAuthenticatedExtendedCard",
                 lambda: http(base + "/", dict(rpc, method="agent/getAuthenticatedExtendedCard"))["result"]),
            ]
            failed = 0
            for name, fetch in variants:
                try:
                    check_card(name, fetch(), jwks)
                    print(f"ok - [card-signature] {name}: every signature verifies (rfc8785 + cryptography)")
                except Exception as error:  # noqa: BLE001 - reported, then counted
                    failed += 1
                    print(f"FAIL - [card-signature] {name}: {error!r}")
            return 1 if failed else 0
        finally:
            server.terminate()
            server.wait(timeout=10)
            log.close()


if __name__ == "__main__":
    sys.exit(main())
