"""The documentation cannot drift from the code: every configuration key the models accept is
shown in a TOML example of the reference pages, every key shown there exists, every command
has its reference, the README stays a front door, and the site builds strictly (a broken
link or a page outside the navigation fails)."""

from __future__ import annotations

import re
import subprocess
import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel

from autoresearch.config import CampaignConfig
from autoresearch.proposers import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# Keys the models hold that are not written in a file: derived from other keys.
INTERNAL = {"scope_limits"}
# Tables whose keys depend on a `kind` (the proposer's options).
PROPOSER_TABLES = ("proposer", "proposers")


def _models(annotation: object) -> list[type[BaseModel]]:
    """The models an annotation holds (`X | None`, `list[X]`, `bool | X`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        return [m for arg in args for m in _models(arg)]
    return []


# Keys whose value is a free-form table (its keys are the user's: `runtime_env`).
FREEFORM: set[str] = set()


def model_keys(model: type[BaseModel], table: str = "") -> set[str]:
    found: set[str] = set()
    for name, info in model.model_fields.items():
        key = f"{table}.{name}" if table else name
        if typing.get_origin(info.annotation) is dict:
            FREEFORM.add(key)
        nested = _models(info.annotation)
        if nested and name not in PROPOSER_TABLES:
            for sub in nested:
                found |= model_keys(sub, key)
        else:
            found.add(key)
    return found


def config_keys() -> set[str]:
    keys = model_keys(CampaignConfig)
    keys.discard("proposer")
    keys.discard("proposers")
    for kind in REGISTRY.values():
        keys |= {f"proposer.{k}" for k in model_keys(kind.options)}
    keys.add("proposer.kind")
    # `[scope]` as a table: its globs and the caps held apart from them.
    keys |= {"scope.paths"} | {
        f"scope.{k.split('.', 1)[1]}" for k in keys if k.startswith("scope_limits.")
    }
    return {k for k in keys if k.split(".")[0] not in INTERNAL}


TABLE = re.compile(r"^\s*#?\s*\[\[?([a-z_.]+)\]\]?")
KEY = re.compile(r"^\s*#?\s*([a-z_]+)\s*=\s*(\{[^}]*\})?")
INLINE = re.compile(r"([a-z_]+)\s*=")


def documented_keys(text: str) -> set[str]:
    """`table.key` for every key shown in a TOML example (commented-out ones count)."""
    found: set[str] = set()
    for block in re.findall(r"```toml\n(.*?)```", text, re.S):
        table = ""
        for line in block.splitlines():
            if m := TABLE.match(line):
                table = m.group(1)
                table = "proposer" if table == "proposers" else table
                found.add(table)  # a table shown whole is a key shown
                continue
            if m := KEY.match(line):
                key = f"{table}.{m.group(1)}" if table else m.group(1)
                found.add(key)
                for name in INLINE.findall(m.group(2) or ""):  # an inline table's keys
                    found.add(f"{key}.{name}")
    return found


def all_docs() -> str:
    return "\n".join(p.read_text() for p in sorted(DOCS.glob("*.md")))


def test_every_configuration_key_is_documented() -> None:
    missing = sorted(config_keys() - documented_keys(all_docs()))
    assert not missing, f"keys shown in no TOML example of docs/: {missing}"


def test_every_documented_key_exists() -> None:
    known = config_keys()
    # A table given as a whole (`simplicity = true`, `price_per_mtok = {...}`) is a key too.
    known |= {k.rsplit(".", 1)[0] for k in known if "." in k}
    tables = {k.rsplit(".", 1)[0] for k in known if "." in k}
    unknown = sorted(
        k
        for k in documented_keys(all_docs())
        if k not in known
        and k.rsplit(".", 1)[0] in tables | {""}
        and not any(k.startswith(f + ".") for f in FREEFORM)
    )
    assert not unknown, f"docs/ shows keys no model accepts: {unknown}"


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 220
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", text):
        assert (ROOT / target).is_file(), f"README links to a missing page: {target}"


def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "cli" / "index.html").is_file()
    page = (tmp_path / "cli" / "index.html").read_text()
    assert "autoresearch run" in page  # the generated reference of every command
