"""What a TLS connection negotiated, and which implementation served it, from recorded text.

Two outputs of the TLS step's checks (:mod:`tunepath.steps.tls`), recorded as printed:

- ``openssl s_client`` (``-brief`` prints ``Protocol version: TLSv1.3`` and ``Ciphersuite: …``;
  without it, ``New, TLSv1.3, Cipher is …``): :func:`handshake`;
- Tomcat's log, which names each connector's protocol handler after its TLS implementation
  (``Initializing ProtocolHandler ["https-jsse-nio-8443"]``, ``…["https-opensslffm-nio-8443"]``) and
  says which OpenSSL the FFM listener loaded: :func:`provider`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Handshake", "handshake", "provider", "IMPLEMENTATIONS"]

# the implementation part of Tomcat's handler name → what a reader calls it
IMPLEMENTATIONS = {"jsse": "JSSE (the JDK's own)", "opensslffm": "OpenSSL through FFM",
                   "openssl": "OpenSSL through Tomcat Native"}
_BRIEF = {"protocol": re.compile(r"^\s*Protocol version:\s*(\S+)", re.M),
          "cipher": re.compile(r"^\s*Ciphersuite:\s*(\S+)", re.M)}
_GROUP = re.compile(r"^\s*Server Temp Key:\s*([^,\n]+)", re.M)
_LONG = re.compile(r"^New, (\S+), Cipher is (\S+)", re.M)
_HANDLER = re.compile(r'ProtocolHandler \["https-([a-z0-9]+)-nio2?-(\d+)"\]')
_OPENSSL = re.compile(r"OpenSSL successfully initialized using FFM \[([^\]]+)\]")


@dataclass(frozen=True)
class Handshake:
    """What ``openssl s_client`` negotiated; None where its output does not say."""

    protocol: str | None
    cipher: str | None
    key_exchange: str | None = None     # the group of the ephemeral key ("Server Temp Key": X25519 …)


def handshake(text: str) -> Handshake:
    """The protocol, cipher and key-exchange group of an ``openssl s_client`` output (brief or full)."""
    found = {k: (m.group(1) if (m := rx.search(text or "")) else None) for k, rx in _BRIEF.items()}
    if not all(found.values()) and (m := _LONG.search(text or "")):
        found = {"protocol": found["protocol"] or m.group(1), "cipher": found["cipher"] or m.group(2)}
    cipher = found["cipher"] if found["cipher"] not in ("(NONE)", "0000") else None
    group = _GROUP.search(text or "")
    return Handshake(found["protocol"], cipher, group.group(1).strip() if group else None)


def provider(log: str, port: int | None = None) -> str | None:
    """The TLS implementation Tomcat's log names for the HTTPS connector (on ``port`` where given),
    as a reader says it, with the OpenSSL version the FFM listener loaded; None if the log names none."""
    names = [m.group(1) for m in _HANDLER.finditer(log or "") if port is None or m.group(2) == str(port)]
    if not names:
        return None
    name = IMPLEMENTATIONS.get(names[-1], names[-1])
    loaded = _OPENSSL.search(log or "")
    return f"{name} ({loaded.group(1)})" if names[-1] == "opensslffm" and loaded else name
