"""Nothing published carries a private key, a password or a token: runs/ and the built site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.fast

PATTERNS = {
    "PEM private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "OpenSSH key body": re.compile(r"b3BlbnNzaC1rZXktdjE"),          # base64 of "openssh-key-v1"
    "password or token assignment": re.compile(
        r"(?i)(?<![A-Za-z])(password|passwd|passphrase|secret|api[_-]?key|token)\b\s*[=:]\s*\\?[\"']?[A-Za-z0-9/+_.-]{6,}"),
    "AWS access key": re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36}\b"),
    "sudo password variable with a value": re.compile(r"TUNEPATH_SUDO_PASSWORD\s*=\s*\S"),
}


PLACEHOLDER = "AJP_SECRET_GENERATED_PER_RUN"     # what pages show instead of the per-run AJP secret


def scan(root: Path) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if not path.is_file() or path.suffix in (".png", ".woff", ".woff2"):
            continue
        text = path.read_text(errors="replace")
        for name, rx in PATTERNS.items():
            found = [m.group(0) for m in rx.finditer(text) if PLACEHOLDER not in m.group(0)]
            hits += [f"{path.relative_to(root)}: {name}: {found[0][:40]}"] if found else []
    return hits


def test_the_scanner_finds_what_it_looks_for(tmp_path):
    (tmp_path / "a.json").write_text('{"x": "-----BEGIN OPENSSH PRIVATE KEY-----"}')
    (tmp_path / "b.ipynb").write_text('"sudo_password = \\"hunter2hunter2\\""')
    assert len(scan(tmp_path)) == 2


def test_recorded_runs_carry_no_secret():
    assert scan(ROOT / "runs") == []


@pytest.mark.docs
def test_built_site_carries_no_secret(built_site):
    assert scan(built_site.public) == []
