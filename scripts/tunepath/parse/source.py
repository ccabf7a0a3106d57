"""Reading a report: size limit, file kinds, encodings; every failure one :class:`ReportReadError`.

A real wrk2 report with both detailed spectra is about 20 KB, and even 128 threads' calibration
lines stay far below a megabyte, so anything above :data:`MAX_REPORT_BYTES` is refused before it
is read (a 200 MB file once took 101 s and 1.9 GB of memory). The size is checked with
``stat`` and at most the limit plus one byte is ever read, from a file or from stdin.

Only regular files are opened: a FIFO would block until something writes to it and a device
(``/dev/zero``) never ends. Bytes that are not UTF-8 become U+FFFD and stay visible to the
parsers, which report the lines they damaged; a UTF-16 file (PowerShell's ``>``) is decoded
from its byte-order mark.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat

from tunepath.parse.problems import ParseError

__all__ = ["MAX_REPORT_BYTES", "ReportReadError", "decode", "display_name", "read_report_file", "read_report_stream"]

MAX_REPORT_BYTES = 16 * 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class ReportReadError(ParseError):
    """The report could not be read at all; the message names the file."""


def display_name(path) -> str:
    """A path as a message shows it: long names shortened in the middle."""
    text = os.fsdecode(path)
    if not text.isprintable():             # a newline in a name must not split the one-line message
        text = repr(text)[1:-1]
    return text if len(text) <= 80 else text[:40] + "…" + text[-30:]


def _too_big(name: str, size: str = "") -> ReportReadError:
    return ReportReadError(f"{name}: {size}larger than the {MAX_REPORT_BYTES // (1024 * 1024)} MiB a report "
                           "can be (a full wrk2 report is about 20 KB): is this the right input?")


def decode(data: bytes) -> str:
    """Text of a report: UTF-16 by its byte-order mark, else UTF-8 with bad bytes as U+FFFD."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def _open_error(name: str, exc: OSError) -> ReportReadError:
    plain = {errno.ENOENT: "no such file", errno.EISDIR: "is a directory, not a report"}
    if exc.errno in plain:
        return ReportReadError(f"{name}: {plain[exc.errno]}")
    why = {errno.EACCES: "permission denied (check the file's and its directories' permissions)",
           errno.EPERM: "permission denied", errno.ENAMETOOLONG: "the file name is too long",
           errno.ENOTDIR: "a part of the path is not a directory",
           errno.ELOOP: "too many levels of symbolic links"}.get(exc.errno, exc.strerror or str(exc))
    return ReportReadError(f"{name}: cannot read the report: {why}")


def read_report_file(path) -> str:
    """The text of a report file, refused with one line when it cannot be a report."""
    name = display_name(path)
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        kind = next((label for test, label in _KINDS if test(info.st_mode)), None)
        if kind:
            raise ReportReadError(f"{name}: is {kind}, not a regular file: save the report to a file, "
                                  "or pipe it into `tunepath parse -`")
        if info.st_size > MAX_REPORT_BYTES:
            raise _too_big(name, f"{info.st_size:,} bytes, ")
        with open(path, "rb") as fh:
            data = fh.read(MAX_REPORT_BYTES + 1)
    except (OSError, ValueError) as exc:      # ValueError: a NUL byte in the name
        if isinstance(exc, ReportReadError):
            raise
        if isinstance(exc, OSError):
            raise _open_error(name, exc) from None
        raise ReportReadError(f"{name}: not a usable file name ({exc})") from None
    if len(data) > MAX_REPORT_BYTES:
        raise _too_big(name, "grew while being read, ")
    return decode(data)


def read_report_stream(stream, name: str = "stdin") -> str:
    """The text of a report read from a binary stream, at most the limit plus one byte."""
    try:
        data = stream.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise ReportReadError(f"{name}: cannot read the report: {exc.strerror or exc}") from None
    if len(data) > MAX_REPORT_BYTES:
        raise _too_big(name)
    return decode(data)
