"""One builder for campaign configs in tests: the toy campaign, with overrides.

    campaign_toml(**{"metric.command": "python bench.py", "stop.plateau": 3})

A dotted key sets one value in a table; None removes the key (or the whole table).
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import tomlkit

from autoresearch.testing.repo import make_repo

TOY: dict[str, Any] = {
    "name": "toy",
    "goal": "make the score zero",
    "scope": ["calc.py"],
    "harness": ["bench.py"],
    "metric": {
        "command": "python bench.py",
        "direction": "minimize",
        "pattern": "score: ([-+0-9.eE]+)",
        "target": 0,
    },
    "guard": {"command": "python -c 'import calc; assert calc.N != 5'"},
    "stop": {"max_iterations": 20},
    "proposer": {"kind": "command", "command": "bash propose.sh"},
    # The toy metric is exact; the tests count its runs as the one-run rule takes them.
    # `rule = "auto"` (the default) has tests of its own (test_auto_rule.py).
    "decision": {"rule": "strict"},
}


def campaign_config(**overrides: Any) -> dict[str, Any]:
    config = copy.deepcopy(TOY)
    for dotted, value in overrides.items():
        *tables, key = dotted.split(".")
        table = config
        for name in tables:
            table = table.setdefault(name, {})
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return config


def campaign_toml(**overrides: Any) -> str:
    return tomlkit.dumps(campaign_config(**overrides))


def script_campaign(
    tmp_path: Path,
    script: str,
    *,
    bench: str = "import calc\nprint(calc.N)\n",
    files: dict[str, str] | None = None,
    **overrides: Any,
) -> Path:
    """A repository with campaign "t" whose proposer is the bash `script` (kept outside the
    repository): metric `python bench.py` (the last number), no guard, three attempts."""
    proposer = tmp_path / "propose.sh"
    proposer.write_text("#!/bin/bash\n" + script)
    config = campaign_toml(
        name="t",
        goal=None,
        guard=overrides.pop("guard", None),
        **{
            "metric.pattern": None,
            "metric.target": None,
            "metric.timeout": 30,
            "stop.max_iterations": 3,
            "stop.plateau": 0,
            "proposer.command": f"bash {proposer}",
            "proposer.timeout": 30,
            **overrides,
        },
    )
    return make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": bench, "autoresearch.toml": config, **(files or {})},
    )


V1 = Path(__file__).resolve().parent / "fixtures" / "ledger_v1"


def v1_campaign(tmp_path: Path, state: bool = True) -> Path:
    """The toy campaign as 0.1.0 left it: its repository with the engine's refs, its ledger
    and (with `state`) its state.json, ready to resume or verify."""
    from autoresearch.testing.repo import git

    repo = tmp_path / "toy"
    subprocess.run(["git", "clone", "-q", str(V1 / "toy.bundle"), str(repo)], check=True)
    git(repo, "checkout", "-q", "main")
    for line in git(repo, "ls-remote", str(V1 / "toy.bundle")).splitlines():
        sha, ref = line.split()
        if "autoresearch" in ref:
            git(repo, "update-ref", ref, sha)
    folder = repo / ".autoresearch" / "toy"
    folder.mkdir(parents=True)
    shutil.copy(V1 / "ledger.jsonl", folder / "ledger.jsonl")
    if state:
        shutil.copy(V1 / "state.json", folder / "state.json")
    (repo / ".autoresearch" / ".gitignore").write_text("*\n")
    return repo
