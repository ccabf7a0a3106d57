"""The copies of the workplace's shared folder in tests/data/shared/ are what the tests read.

They are facts (real load-generator outputs, the original path's published outputs, wrk2's upstream
tarball) copied byte for byte, so that a clone without ``../shared`` runs every test. Two checks:
the copies match their checksum list everywhere, and, where ``../shared`` exists (or
``TUNEPATH_SHARED`` names it), every copy equals its source and no source file is left uncopied.
"""

from __future__ import annotations

import hashlib

import pytest

from conftest import SHARED, SHARED_SOURCE

pytestmark = pytest.mark.fast

SUMS = SHARED / "SHA256SUMS"
COPIED = ("fixtures", "reference", "vendor")     # the folders of ../shared that tests read


def listed() -> dict[str, str]:
    """``./relative/path`` → SHA-256, from SHA256SUMS (``sha256sum`` format)."""
    out = {}
    for line in SUMS.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        out[name] = digest
    return out


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_copies_match_their_checksums_and_nothing_is_unlisted():
    sums = listed()
    present = {"./" + p.relative_to(SHARED).as_posix() for p in SHARED.rglob("*") if p.is_file()} - {"./SHA256SUMS"}
    assert present == set(sums), f"files not in SHA256SUMS: {sorted(present - set(sums))}; " \
                                 f"listed but missing: {sorted(set(sums) - present)}"
    changed = [name for name, want in sums.items() if digest(SHARED / name) != want]
    assert not changed, f"copies changed since they were taken from ../shared: {changed}"


def test_the_copies_equal_the_shared_folder_where_it_exists():
    """Where ../shared is here, every file the tests read from it is copied and unchanged. Without it
    (a clone on its own, GitHub) the checksum test above stands for this one: nothing is skipped."""
    if not SHARED_SOURCE.is_dir():
        return
    source = {"./" + p.relative_to(SHARED_SOURCE).as_posix(): p
              for folder in COPIED for p in (SHARED_SOURCE / folder).rglob("*") if p.is_file()}
    sums = {name: d for name, d in listed().items() if name.split("/")[1] in COPIED}
    assert set(source) == set(sums), f"in ../shared but not copied: {sorted(set(source) - set(sums))}; " \
                                     f"copied but gone from ../shared: {sorted(set(sums) - set(source))}"
    differ = [name for name, path in source.items() if digest(path) != sums[name]]
    assert not differ, f"../shared changed: copy these again into tests/data/shared/ (and SHA256SUMS): {differ}"
