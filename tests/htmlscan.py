"""Tiny HTML readers for tests: figures, command blocks (a reader's, and as run) and images of a built page."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path


class _Scan(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.figures: list[tuple[dict, str]] = []
        self.commands: list[tuple[dict, str]] = []     # the reader's command of each block
        self.as_run: list[tuple[dict, str]] = []       # … and the folded literal (details.commands-as-run)
        self.images: list[dict] = []
        self._figure: dict | None = None
        self._fig_text: list[str] = []
        self._cmd: dict | None = None
        self._lit: dict | None = None
        self._in_code = False
        self._in_pre = False
        self._code: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "span" and "figure" in classes:
            self._figure, self._fig_text = a, []
        elif tag == "div" and "commands" in classes:
            self._cmd = a
        elif tag == "details" and "commands-as-run" in classes:
            self._lit = a
        elif tag == "pre":
            self._in_pre = True
        elif tag == "code" and self._in_pre and (self._cmd is not None or self._lit is not None):
            self._in_code, self._code = True, []
        elif tag == "img":
            self.images.append(a)

    def handle_endtag(self, tag):
        if tag == "span" and self._figure is not None:
            self.figures.append((self._figure, "".join(self._fig_text)))
            self._figure = None
        elif tag == "pre":
            self._in_pre = False
        elif tag == "code" and self._in_code:
            self._in_code = False
            if self._cmd is not None:
                self.commands.append((self._cmd, "".join(self._code)))
                self._cmd = None
            elif self._lit is not None:
                self.as_run.append((self._lit, "".join(self._code)))
                self._lit = None

    def handle_data(self, data):
        if self._figure is not None:
            self._fig_text.append(data)
        if self._in_code:
            self._code.append(data)


def scan(path: Path) -> _Scan:
    s = _Scan()
    s.feed(Path(path).read_text(encoding="utf-8"))
    return s
