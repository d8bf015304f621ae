"""The values a provider makes up for each reply: ids, signatures, padding, the date.

Strategy: what a check compares (a call's id, a signature to be sent back) is derived
from a seed, so a failure message is the same on every run; what nothing compares (a
request id) is fresh on every response, as a real server's is. Both are shaped like
the provider's own, since real clients reject or mishandle ``call_1``.
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import Any, List

__all__ = ["fresh_id", "http_date", "obfuscation", "provider_id", "signature"]

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _sha256_constructor() -> Any:
    """CPython's own SHA-256 where it has one, else hashlib's: the digests are the same.

    Every wire makes its ids when it is imported; hashlib would load OpenSSL for them,
    which costs a test module several milliseconds before any case runs.
    """
    for name in ("_sha2", "_sha256"):  # CPython 3.12 and later; 3.9 to 3.11
        try:
            return importlib.import_module(name).sha256
        except ImportError:
            continue
    import hashlib

    return hashlib.sha256


_SHA256 = _sha256_constructor()


def _digest(data: bytes) -> bytes:
    """The SHA-256 digest of ``data``."""
    return bytes(_SHA256(data).digest())


@functools.lru_cache(maxsize=4096)  # a conversation asks for the same ids turn after turn
def provider_id(prefix: str, seed: str, length: int = 24, alphabet: str = _ALNUM) -> str:
    """An id shaped like a provider's own (``call_`` + 24 characters), the same for a seed.

    Real clients reject or mishandle ids like ``call_1``; these look random but are
    derived from ``seed`` so that a failure message is the same on every run.
    """
    digest = _digest(seed.encode("utf-8"))
    while len(digest) < length:
        digest += _digest(digest)
    return prefix + "".join(alphabet[b % len(alphabet)] for b in digest[:length])


@functools.lru_cache(maxsize=1024)
def signature(seed: str, size: int = 72) -> str:
    """An opaque signature as providers send one: ``size`` bytes in standard base64, padded,
    the same for a seed. Real signatures are base64 of binary data, and an SDK that holds
    them as bytes re-encodes them, so they must decode."""
    import binascii

    digest = _digest(seed.encode("utf-8"))
    while len(digest) < size:
        digest += _digest(digest)
    return binascii.b2a_base64(digest[:size], newline=False).decode("ascii")


def fresh_id(prefix: str, length: int, alphabet: str = _ALNUM) -> str:
    """A request id shaped like the provider's, new on every response.

    Real servers never repeat one; a client that logs, traces or deduplicates by it
    must see them differ. Nothing a check compares depends on it.
    """
    # One read of the system's random source per id, not one per character: each read
    # releases the interpreter lock, and a busy run makes thousands of these ids.
    size = len(alphabet)
    usable = 256 - 256 % size  # bytes at or above this would favour the alphabet's start
    picked: List[str] = []
    while len(picked) < length:
        picked += [alphabet[b % size] for b in os.urandom(2 * length) if b < usable]
    return prefix + "".join(picked[:length])


def http_date() -> str:
    """The ``date`` header every real response carries (RFC 9110 IMF-fixdate), now."""
    import email.utils  # per reply, not per import: it loads socket and urllib

    return email.utils.formatdate(usegmt=True)


def obfuscation(seed: str) -> str:
    """The random padding OpenAI puts last in every stream delta since about Aug 2025.

    It hides token lengths from anyone watching the traffic; clients ignore it. Its
    length varies (1 to 16 characters here), derived from ``seed``.
    """
    length = 1 + _digest(seed.encode("utf-8"))[0] % 16
    return provider_id("", f"obfuscation/{seed}", length)
