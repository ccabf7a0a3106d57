"""Render a few pages with the project's shortcodes and given step documents (a small Hugo site)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from conftest import ROOT, unavailable


def hugo(site: Path, pages: dict[str, str], docs: dict[str, dict]) -> tuple[int, str]:
    """Render ``pages`` (name → markdown body) into ``site``/public with ``docs`` as
    data/steps/<step>.json; returns (returncode, Hugo's output)."""
    from tunepath.publish.build import hugo_binary

    try:
        binary = hugo_binary()
    except Exception as exc:           # noqa: BLE001  (TunepathError: Hugo is not installed)
        unavailable(f"{exc}")
    for sub in ("_shortcodes", "_partials"):
        shutil.copytree(ROOT / "layouts" / sub, site / "layouts" / sub)
    (site / "layouts" / "single.html").write_text("{{ .Content }}\n")
    (site / "layouts" / "home.html").write_text("home\n")
    (site / "hugo.toml").write_text('baseURL = "/"\ndisableKinds = ["taxonomy", "term", "rss", "sitemap", '
                                    '"robotstxt", "section"]\n')
    (site / "data" / "steps").mkdir(parents=True, exist_ok=True)
    for step, doc in docs.items():
        (site / "data" / "steps" / f"{step}.json").write_text(json.dumps(doc, allow_nan=False))
    (site / "content").mkdir(parents=True, exist_ok=True)
    for name, body in pages.items():
        (site / "content" / f"{name}.md").write_text(f"---\ntitle: {name}\n---\n\n{body}\n")
    proc = subprocess.run([binary, "--source", str(site), "--destination", str(site / "public"),
                           "--logLevel", "warn"], capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr
