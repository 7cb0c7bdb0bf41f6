"""MkDocs hook: the site's front page is the README, with its links to `docs/` pages made
relative to the site, so that the two never differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MARKER = "<!-- readme -->"
README = Path(__file__).resolve().parents[2] / "README.md"


def front_page() -> str:
    text = README.read_text(encoding="utf-8")
    text = text.replace("](docs/", "](")
    return text.replace("[CONTRIBUTING.md](CONTRIBUTING.md)", "[development](development.md)")


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, front_page())
    return markdown
