"""The commented `autoresearch.toml` that `autoresearch init` writes."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATE = """\
# autoresearch campaign: an agent proposes one change at a time, the metric command
# measures it, and the change is kept only if the number really got better.
# Every key is described in the Configuration section of the autoresearch README.

name = "{name}"                   # branch autoresearch/<name>, folder .autoresearch/<name>/
goal = "describe what should get better"   # handed to the proposer
# instructions = "program.md"       # optional prose for the proposer
scope = {scope}                   # globs the proposer may change, create or delete
harness = {harness}               # globs that must never change (fingerprinted)
# share = ["data"]                  # git-ignored paths linked into the workspace (datasets, caches)

[metric]
command = "{metric}"              # run in the workspace with bash
direction = "minimize"            # or "maximize"
# pattern = 'score: ([-+0-9.eE]+)'  # regex with one group; default: the last number on stdout
timeout = 600                     # seconds
# target = 0                        # stop when reached

# [guard]                           # must pass for a change to be kept
# command = "pytest -q"
# timeout = 600

[stop]
max_iterations = 20               # attempts in total, across resumes
plateau = 0                       # stop after N attempts in a row not kept (0 = off)
max_minutes = 0                   # wall clock of one run (0 = off)

[proposer]
kind = "command"                  # a shell command that edits the workspace
command = "claude -p \\"$(cat $AUTORESEARCH_PROMPT_FILE)\\" --permission-mode acceptEdits"
timeout = 1800
"""


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return (slug or "campaign")[:40]


def render_init(root: Path) -> str:
    py_files = sorted(p.name for p in root.glob("*.py"))
    bench = next((n for n in py_files if n.startswith(("bench", "eval", "score"))), None)
    if (root / "src").is_dir():
        scope = ["src/**"]
    else:
        scope = [n for n in py_files if n != bench][:5] or ["*.py"]
    harness = [bench] if bench else []
    metric = f"python {bench}" if bench else "python bench.py"
    return TEMPLATE.format(
        name=_slug(root.name),
        scope="[" + ", ".join(f'"{s}"' for s in scope) + "]",
        harness="[" + ", ".join(f'"{h}"' for h in harness) + "]",
        metric=metric,
    )
