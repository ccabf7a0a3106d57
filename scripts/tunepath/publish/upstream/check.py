"""Check a Learning Path directory against the contributor rules of Arm's learning-paths
repository (``rules.py``): the front matter of ``_index.md``, ``_next-steps.md`` and every
step page, the shortcodes used, the images and their alt text, and no machine paths.

``check_path(lp_dir)`` returns every problem found (an empty list: the path passes);
``find_path(root)`` accepts the learning path's own directory or a checkout of that repository.
Every page is read once, by :func:`read_page`: a page that is no regular file (a directory, a
FIFO), larger than :data:`PAGE_MAX_BYTES`, not UTF-8, or whose front matter cannot be read is one
problem of the check, never an exception or a wait.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml

from tunepath.errors import TunepathError
from tunepath.publish.upstream import rules

__all__ = ["Problem", "check_path", "find_path", "front_matter", "read_page", "shortcode_names", "images",
           "PAGE_MAX_BYTES"]

#: no page of a learning path comes near this (ours are 20 KB at most); a larger file is no page
PAGE_MAX_BYTES = 1 << 20

_SHORTCODE = re.compile(r"\{\{[<%]\s*/?\s*([A-Za-z][\w-]*)")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)(?:\s+\"([^\"]*)\")?\)")
_FENCE = re.compile(r"^(```|~~~)")


@dataclass(frozen=True)
class Problem:
    file: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message}"


def front_matter(text: str) -> tuple[dict, str]:
    """The YAML front matter of a page and its body; ValueError, in one line, when there is none or
    it cannot be read."""
    if not text.startswith("---\n"):
        raise ValueError("no front matter (the page must start with a line '---')")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise ValueError("the front matter has no closing '---' line")
    try:
        data = yaml.safe_load(text[4:end]) or {}
    except RecursionError:
        raise ValueError("the front matter is nested too deeply") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML: {_yaml_error(exc)}") from None
    if not isinstance(data, dict):
        raise ValueError("the front matter is not a mapping")
    return data, text[end + 5:]


def _yaml_error(exc: yaml.YAMLError) -> str:
    """PyYAML's error in one line, its place counted in the page's lines (the front matter starts on
    the second)."""
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or " ".join(str(exc).split())
    return f"{what} (line {mark.line + 2}, column {mark.column + 1})" if mark is not None else what


def read_page(path: Path) -> str:
    """The text of a page; ValueError saying why when it is not a regular file of at most
    :data:`PAGE_MAX_BYTES` bytes of UTF-8. Never waits: a FIFO is opened without blocking and
    refused before anything is read from it."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise ValueError(f"not a regular file ({_kind(mode)}): a page is a Markdown file")
            data = f.read(PAGE_MAX_BYTES + 1)
    except IsADirectoryError:
        raise ValueError("not a regular file (a directory): a page is a Markdown file") from None
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > PAGE_MAX_BYTES:
        raise ValueError(f"larger than {PAGE_MAX_BYTES >> 20} MiB: no page of a learning path is")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def shortcode_names(body: str) -> list[str]:
    """Every shortcode name used in a page body (code blocks excluded)."""
    return [m.group(1) for m in _SHORTCODE.finditer(_prose(body))]


def images(body: str) -> list[tuple[str, str, str]]:
    """(alt, target, caption) of every Markdown image in a page body (code blocks excluded)."""
    return [(m.group(1), m.group(2), m.group(3) or "") for m in _IMAGE.finditer(_prose(body))]


def _prose(body: str) -> str:
    out, fenced = [], False
    for line in body.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def find_path(root: Path, slug: str | None = None) -> Path:
    """The learning path directory under ``root``: root itself when it holds ``_index.md``,
    else the one path under ``root/content/learning-paths/<category>/`` (named ``slug`` if given)."""
    root = Path(root)
    if (root / rules.INDEX_FILE).is_file():
        return root
    base = root / "content" / "learning-paths" / rules.CATEGORY
    found = sorted(p.parent for p in base.glob(f"{slug or '*'}/{rules.INDEX_FILE}"))
    if len(found) != 1:
        what = "no learning path" if not found else f"{len(found)} learning paths"
        raise TunepathError(f"{root}: {what} under content/learning-paths/{rules.CATEGORY}/"
                            + ("" if slug else "; name the path's own directory instead"))
    return found[0]


def check_path(lp: Path) -> list[Problem]:
    lp = Path(lp)
    problems: list[Problem] = []
    if lp.parent.name != rules.CATEGORY:
        problems.append(Problem(lp.name, f"the path must sit in content/learning-paths/{rules.CATEGORY}/, "
                                         f"not in {lp.parent.name}/"))
    pages = {p.name: p for p in sorted(lp.glob("*.md"))}
    for required in (rules.INDEX_FILE, rules.NEXT_STEPS_FILE):
        if required not in pages:
            problems.append(Problem(required, "missing: every Learning Path has one"))
    texts = _read_pages(pages, problems)
    parsed: dict[str, dict] = {}
    bodies: dict[str, str] = {}
    for name, text in texts.items():
        try:
            meta, body = front_matter(text)
        except ValueError as e:
            problems.append(Problem(name, f"front matter unreadable: {e}"))
            continue
        parsed[name], bodies[name] = meta, body
        problems += _check_body(lp, name, body)
        if name == rules.INDEX_FILE and re.sub(r"<!--.*?-->", "", body, flags=re.S).strip():
            problems.append(Problem(name, "has a body, which the repository's theme does not show: "
                                          "move it to a page of its own"))
    if rules.INDEX_FILE in parsed:
        problems += _check_index(parsed[rules.INDEX_FILE])
        if lp.name == rules.UPSTREAM_SLUG:       # a revision of their path: its authors and its name stay
            author = str(parsed[rules.INDEX_FILE].get("author") or "")
            if rules.UPSTREAM_AUTHORS not in author:
                problems.append(Problem(rules.INDEX_FILE, f"author {author!r} drops the path's own authors "
                                                          f"({rules.UPSTREAM_AUTHORS})"))
            reading = parsed[rules.INDEX_FILE].get("further_reading") or []
            if any(isinstance(r, dict) and rules.UPSTREAM_SLUG in str((r.get("resource") or {}).get("link", ""))
                   for r in reading):
                problems.append(Problem(rules.INDEX_FILE, "further_reading links to this path's own address"))
            if not any(rules.ATTRIBUTION.search(text) for text in texts.values()):
                problems.append(Problem(lp.name, "no page names the path this one revises "
                                                 "(Tune network workloads on Arm-based bare-metal instances)"))
        problems += _check_minutes(parsed[rules.INDEX_FILE], bodies)
    problems += _check_pages(parsed)
    problems += _check_files(lp, pages)
    return problems


def _read_pages(pages: dict[str, Path], problems: list[Problem]) -> dict[str, str]:
    """Every page's text, read once (:func:`read_page`); a page that cannot be read is added to
    ``problems`` and left out."""
    texts: dict[str, str] = {}
    for name, page in pages.items():
        try:
            texts[name] = read_page(page)
        except ValueError as e:
            problems.append(Problem(name, str(e)))
    return texts


def prose_words(body: str) -> int:
    """A page's words as a reader reads them: code blocks and comments left out."""
    return len(_prose(re.sub(r"<!--.*?-->", "", body, flags=re.S)).split())


def _check_minutes(meta: dict, bodies: dict[str, str]) -> list[Problem]:
    """``minutes_to_complete`` covers at least the reading of every page (rules.READING_WPM); the
    bodies of the pages the check could read (any other is a problem of its own)."""
    minutes = meta.get("minutes_to_complete")
    words = sum(prose_words(body) for body in bodies.values())
    reading = -(-words // rules.READING_WPM)
    if isinstance(minutes, int) and minutes < reading:
        return [Problem(rules.INDEX_FILE, f"minutes_to_complete {minutes} is less than the time to read the "
                                          f"pages: {words} words at {rules.READING_WPM} a minute take {reading}")]
    return []


def _check_index(meta: dict) -> list[Problem]:
    f = rules.INDEX_FILE
    out = [Problem(f, f"front matter lacks required field {k!r}") for k in rules.INDEX_REQUIRED
           if meta.get(k) in (None, "", [])]
    if meta.get("skilllevels") and meta["skilllevels"] not in rules.SKILL_LEVELS:
        out.append(Problem(f, f"skilllevels {meta['skilllevels']!r} is not one of {sorted(rules.SKILL_LEVELS)}"))
    allowed = rules.SUBJECTS[rules.CATEGORY]
    if meta.get("subjects") and meta["subjects"] not in allowed:
        out.append(Problem(f, f"subjects {meta['subjects']!r} is not allowed in {rules.CATEGORY} "
                              f"(one of {sorted(allowed)})"))
    out += _closed_list(meta, "operatingsystems", rules.OPERATING_SYSTEMS)
    out += _closed_list(meta, "cloud_service_providers", rules.CLOUD_SERVICE_PROVIDERS)
    out += _closed_list(meta, "armips", rules.ARM_IP_FAMILIES)
    if meta.get("weight") not in (None, 1):
        out.append(Problem(f, f"weight must be 1, not {meta['weight']!r}"))
    if meta.get("learning_path_main_page") not in (None, "yes"):
        out.append(Problem(f, "learning_path_main_page must be \"yes\""))
    out += [Problem(f, f"{k} must be true or false") for k in rules.BOOLEAN_FIELDS
            if k in meta and not isinstance(meta[k], bool)]
    for key in ("title", "description", "who_is_this_for", "learning_objectives", "prerequisites"):
        out += _sentences(meta, key)
    out += _counted(meta, "learning_objectives", rules.LEARNING_OBJECTIVES)
    out += _counted(meta, "further_reading", rules.FURTHER_READING)
    for i, item in enumerate(meta.get("further_reading") or []):
        res = item.get("resource") if isinstance(item, dict) else None
        if not isinstance(res, dict) or not all(res.get(k) for k in ("title", "link", "type")):
            out.append(Problem(f, f"further_reading[{i}] needs resource: title, link and type"))
        elif res["type"] not in rules.RESOURCE_TYPES:
            out.append(Problem(f, f"further_reading[{i}] type {res['type']!r} is not one of "
                                  f"{sorted(rules.RESOURCE_TYPES)}"))
    return out


def _closed_list(meta: dict, key: str, allowed: frozenset) -> list[Problem]:
    value = meta.get(key)
    if value in (None, "", []):
        return []
    values = value if isinstance(value, list) else [value]
    return [Problem(rules.INDEX_FILE, f"{key} {v!r} is not one of {sorted(allowed)}")
            for v in values if v not in allowed]


def _counted(meta: dict, key: str, bounds: tuple[int, int]) -> list[Problem]:
    value = meta.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not bounds[0] <= len(value) <= bounds[1]:
        n = len(value) if isinstance(value, list) else "not a list"
        return [Problem(rules.INDEX_FILE, f"{key} must list {bounds[0]} to {bounds[1]} items ({n})")]
    return []


def _sentences(meta: dict, key: str) -> list[Problem]:
    """Each item of a list of sentences is one string (a ': ' inside an unquoted item makes YAML
    read it as a mapping)."""
    value = meta.get(key)
    items = value if isinstance(value, list) else [value] if value is not None else []
    return [Problem(rules.INDEX_FILE, f"{key}[{i}] is not a sentence (quote it if it holds ': ')")
            for i, item in enumerate(items) if not isinstance(item, str) or not item.strip()]


def _check_pages(parsed: dict[str, dict]) -> list[Problem]:
    out: list[Problem] = []
    weights: dict[int, str] = {}
    for name, meta in parsed.items():
        if meta.get("layout") != rules.LAYOUT:
            out.append(Problem(name, f"layout must be {rules.LAYOUT!r}, not {meta.get('layout')!r}"))
        if not meta.get("title"):
            out.append(Problem(name, "no title"))
        weight = meta.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 1:
            out.append(Problem(name, f"weight must be a whole number from 1, not {weight!r}"))
            continue
        if weight in weights:
            out.append(Problem(name, f"weight {weight} is also the weight of {weights[weight]}"))
        weights[weight] = name
        if name not in (rules.INDEX_FILE, rules.NEXT_STEPS_FILE) and not meta.get("description"):
            out.append(Problem(name, "no description (every page but _next-steps.md has one)"))
    nxt = parsed.get(rules.NEXT_STEPS_FILE)
    if nxt is not None:
        if nxt.get("title") != rules.NEXT_STEPS_TITLE:
            out.append(Problem(rules.NEXT_STEPS_FILE, f"title must be {rules.NEXT_STEPS_TITLE!r}"))
        others = [w for w, n in weights.items() if n != rules.NEXT_STEPS_FILE]
        if isinstance(nxt.get("weight"), int) and others and nxt["weight"] <= max(others):
            out.append(Problem(rules.NEXT_STEPS_FILE, "weight must be larger than every page's"))
    return out


def _check_body(lp: Path, name: str, body: str) -> list[Problem]:
    out = [Problem(name, f"shortcode {{{{< {s} >}}}} is not one the repository defines")
           for s in dict.fromkeys(shortcode_names(body)) if s not in rules.SHORTCODES]
    seen: dict[str, int] = {}
    for alt, target, caption in images(body):
        out += _check_image(lp, name, alt, target, caption)
        key = alt.replace("#center", "").strip().lower()
        seen[key] = seen.get(key, 0) + 1
    out += [Problem(name, f"the alt text {k!r} is used for {n} images") for k, n in seen.items() if n > 1]
    out += [Problem(name, f"machine path {m.group(0)!r}") for m in rules.MACHINE_PATH.finditer(body)]
    prose = _prose(re.sub(r"<!--.*?-->", "", body, flags=re.S))
    words = prose_words(body)
    if words > rules.PAGE_WORDS:
        out.append(Problem(name, f"{words} words: the review guidance flags pages over {rules.PAGE_WORDS}"))
    british = sorted({m.group(0).lower() for m in rules.BRITISH.finditer(prose)})
    if british:
        out.append(Problem(name, f"British spelling ({', '.join(british)}): the repository uses US English"))
    for m in rules.AUDIT_IMAGE.finditer(prose):
        read = m.group(1).strip()           # what the audit reads: the target, and a title only if it closed
        cut = read.count('"') % 2 == 1 or (" " in read and not re.fullmatch(r'\S+\s+"[^"]*"', read))
        if cut or ("://" not in read and read and not (lp / read.split()[0]).is_file()):
            out.append(Problem(name, f"the repository's image audit reads {m.group(1)!r} as the image: "
                                     "keep parentheses out of the caption"))
    if name != rules.NEXT_STEPS_FILE and not rules.PROVENANCE.search(body):
        out.append(Problem(name, "no provenance comment (<!-- tunepath export: … -->)"))
    return out


def _check_image(lp: Path, name: str, alt: str, target: str, caption: str) -> list[Problem]:
    words = len(re.findall(r"[A-Za-z0-9]+", alt.replace("#center", "")))
    low, high = rules.ALT_WORDS
    out = []
    if not low <= words <= high:
        out.append(f"alt text has {words} words (wanted {low} to {high})")
    if rules.ALT_PLACEHOLDER.search(alt) or alt.strip()[:1] in "\"'" or re.search(r"\s#center", alt):
        out.append("alt text is a placeholder, is quoted, or has a space before #center")
    if re.match(r"Figure\s+\d+\s*:", caption, re.I):
        out.append("caption is numbered (\"Figure N:\")")
    if "://" not in target:
        file = (lp / target).resolve()
        if not file.is_file() or lp.resolve() not in file.parents:
            out.append("image file is missing from the path's directory")
        elif file.suffix.lower() not in rules.IMAGE_EXTENSIONS:
            out.append(f"image type {file.suffix} is not used there")
    return [Problem(name, f"image {target}: {m}") for m in out]


def _check_files(lp: Path, pages: dict[str, Path]) -> list[Problem]:
    out = []
    for f in sorted(lp.rglob("*")):
        if f.suffix == ".md" and f.parent == lp:         # a page: read_page says what is wrong with it
            continue
        try:
            info = f.stat()
        except OSError as exc:                             # a symbolic link to nothing
            out.append(Problem(f.name, f"cannot be read ({exc.strerror or exc})"))
            continue
        if stat.S_ISDIR(info.st_mode) or f.suffix == ".md":
            continue
        if f.suffix.lower() not in rules.IMAGE_EXTENSIONS:
            out.append(Problem(f.name, "a file that is neither a page nor an image"))
        elif not stat.S_ISREG(info.st_mode):
            out.append(Problem(f.name, f"not a regular file ({_kind(info.st_mode)})"))
        elif f.suffix.lower() in {".png", ".jpg", ".jpeg"} and info.st_size > rules.RASTER_MAX_KB * 1024:
            out.append(Problem(f.name, f"larger than {rules.RASTER_MAX_KB} KB"))
    return out
