"""`autoresearch import`: program files of both styles and a pi-autoresearch session, each
written here from its public description, become a config that loads; what could not be
inferred is said; imported history stays self-reported and out of every decision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.agent import mode as agent_mode
from autoresearch.agent.importing import import_pi, import_program, read_imported
from autoresearch.config import load_campaign
from autoresearch.store.ledger import Ledger
from conftest import Runner, make_repo
from unit.memory import MemoryExecutor

KARPATHY = """\
# autoresearch

This is an experiment to have the LLM do its own research.

## Setup

Read these files for full context:
   - `README.md` — repository context.
   - `prepare.py` — fixed constants, data prep and evaluation. Do not modify.
   - `train.py` — the file you modify. Model architecture, optimizer, training loop.

## Experimentation

The training script runs for a **fixed time budget of 5 minutes**. You launch it simply
as: `uv run train.py`.

**What you CAN do:**
- Modify `train.py` — this is the only file you edit.

**What you CANNOT do:**
- Modify `prepare.py`. It is read-only.

**The goal is simple: get the lowest val_bpb.**

## Output format

```
val_bpb:          0.997900
```

Extract it with `grep "^val_bpb:" run.log`.

## The experiment loop

LOOP FOREVER:

1. Run the experiment: `uv run train.py > run.log 2>&1`
2. Read out the results: `grep "^val_bpb:\\|^peak_vram_mb:" run.log`

**Timeout**: If a run exceeds 10 minutes, kill it and treat it as a failure.
"""

SEED = """\
# Program: faster sort

## Goal
Make sort_numbers faster
without breaking the tests.

## Metric
- command: `python bench.py`
- direction: lower
- target: 0.5

## Guard
- command: `python -m pytest -q tests`

## Config
- max_iterations: 80
- metric_repeats: 3
- min_delta_pct: 0.5
- scope_files: [sorter.py, util.py]
- agent_strategy: perf
- sandbox_network: none
- mystery_key: 1

## Notes
Only for people: scope_files: [nothing.py]
"""


def repo_with(tmp_path: Path, files: dict[str, str]) -> Path:
    return make_repo(tmp_path / "repo", files)


def test_a_karpathy_style_program(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(
        tmp_path,
        {"program.md": KARPATHY, "train.py": "x = 1\n", "prepare.py": "", "README.md": ""},
    )
    out = invoke(repo, "import", "program.md", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["style"] == "karpathy-style program"
    cfg = load_campaign(repo).config
    assert cfg.scope == ["train.py"] and cfg.harness == ["prepare.py"]
    assert cfg.metric.command == "uv run train.py"
    assert cfg.metric.direction == "minimize" and cfg.metric.timeout == 600
    assert cfg.metric.pattern is not None
    import re

    assert re.search(cfg.metric.pattern, "---\nval_bpb:          0.997900\n", re.M).group(1) == (  # type: ignore[union-attr]
        "0.997900"
    )
    assert any("loops forever" in m for m in report["could_not"])
    # Not twice without --force; the file stays.
    text = (repo / "autoresearch.toml").read_text()
    again = invoke(repo, "import", "program.md")
    assert again.returncode != 0 and "--force" in again.stderr
    assert (repo / "autoresearch.toml").read_text() == text


def test_a_goal_metric_guard_config_program(tmp_path: Path) -> None:
    repo = repo_with(
        tmp_path,
        {"program.md": SEED, "bench.py": "", "sorter.py": "", "util.py": "", "tests/t.py": ""},
    )
    result = import_program(repo, repo / "program.md")
    assert result.style == "Goal/Metric/Guard/Config program"
    cfg = load_campaign(repo).config
    assert cfg.name == "faster-sort"
    assert cfg.goal == "Make sort_numbers faster without breaking the tests."
    assert cfg.metric.command == "python bench.py" and cfg.metric.direction == "minimize"
    assert cfg.metric.target == 0.5
    assert cfg.guard is not None and cfg.guard.command == "python -m pytest -q tests"
    assert cfg.scope == ["sorter.py", "util.py"] and cfg.harness == ["bench.py"]
    assert cfg.stop.max_iterations == 50  # the program's own cap
    assert cfg.decision.rule == "repeats" and cfg.decision.repeats == 3
    assert cfg.decision.min_delta == "0.5%"
    assert cfg.sandbox.network is False
    missing = " ".join(result.missing)
    assert "agent_strategy" in missing and "mystery_key" in missing
    assert any("clamped" in line for line in result.found)


def test_a_program_without_direction_or_scope_says_so(tmp_path: Path) -> None:
    program = "# Program: x\n\n## Goal\nbetter\n\n## Metric\ncommand: python m.py\n"
    repo = repo_with(tmp_path, {"program.md": program, "m.py": ""})
    result = import_program(repo, repo / "program.md")
    assert any("default, higher" in line for line in result.found)
    assert any(m.startswith("scope") for m in result.missing)
    assert "scope = []" in (repo / "autoresearch.toml").read_text()


def test_a_missing_program_is_one_sentence(tmp_path: Path, invoke: Runner) -> None:
    repo = repo_with(tmp_path, {"a.txt": ""})
    out = invoke(repo, "import", "nope.md")
    assert out.returncode != 0 and "no such file" in out.stderr
    assert "Traceback" not in out.stderr
    pi = invoke(repo, "import", "pi")
    assert pi.returncode != 0 and "no pi-autoresearch session" in pi.stderr


def pi_session(tmp_path: Path) -> Path:
    log = [
        {"type": "config", "name": "Sort speed", "metricName": "total_ms", "metricUnit": "ms",
         "bestDirection": "lower"},
        {"run": 1, "commit": "abc1234", "metric": 40.7, "metrics": {}, "status": "keep",
         "description": "baseline", "timestamp": 1767225600000, "segment": 0, "confidence": None},
        {"run": 2, "commit": "bcd2345", "metric": 0.001, "metrics": {}, "status": "keep",
         "description": "too good to be true", "timestamp": 1767225700000, "segment": 0,
         "confidence": 2.5},
        {"type": "hook", "event": "after"},
        {"run": 3, "commit": "cde3456", "metric": 0, "metrics": {}, "status": "crash",
         "description": "broke it", "timestamp": 1767225800000, "segment": 0, "confidence": None},
    ]  # fmt: skip
    notes = (
        "# Autoresearch: sort speed\n\n## Objective\nMake the sort faster.\n\n"
        "## Files in Scope\n- `sort.py` — the sort\n\n## What's Been Tried\n- nothing\n"
    )
    return repo_with(
        tmp_path,
        {
            "autoresearch.jsonl": "".join(json.dumps(e) + "\n" for e in log),
            "autoresearch.md": notes,
            "autoresearch.sh": "#!/bin/bash\npython3 bench.py\n",
            "autoresearch.checks.sh": "#!/bin/bash\ntrue\n",
            "sort.py": "N = 10\n",
            "bench.py": "import sort\nprint(f'METRIC total_ms={abs(sort.N - 3)}')\n",
        },
    )


def test_a_pi_session_and_its_history(tmp_path: Path, invoke: Runner) -> None:
    repo = pi_session(tmp_path)
    out = invoke(repo, "import", "pi")
    assert out.returncode == 0, out.stderr
    assert "imported 3 prior attempts" in out.stdout
    assert "wrote " in out.stdout and "autoresearch start" in out.stdout
    # Before any measurement, `log` already shows the history, marked self-reported.
    shown = invoke(repo, "log")
    assert shown.returncode == 0, shown.stderr
    assert "too good to be true" in shown.stdout and "self-reported" in shown.stdout
    assert "kept " in invoke(repo, "import", "pi").stdout  # the config stays, said so
    campaign = load_campaign(repo)
    cfg = campaign.config
    assert cfg.name == "sort-speed" and cfg.goal == "Make the sort faster."
    assert cfg.metric.command == "bash autoresearch.sh" and cfg.metric.name == "total_ms"
    assert cfg.metric.direction == "minimize"
    assert cfg.guard is not None and cfg.guard.command == "bash autoresearch.checks.sh"
    assert cfg.scope == ["sort.py"]
    assert cfg.harness == ["autoresearch.sh", "autoresearch.checks.sh"]
    imported = read_imported(campaign.state_dir)
    assert [e["status"] for e in imported] == ["keep", "keep", "crash"]
    assert all(e["self_reported"] for e in imported)
    assert imported[1]["metric"] == 0.001 and imported[0]["utc"] == "2026-01-01T00:00:00+00:00"
    first = (campaign.state_dir / "imported.jsonl").read_bytes()
    import_pi(repo, force=True)  # again: the same history, not twice
    assert (campaign.state_dir / "imported.jsonl").read_bytes() == first
    # The engine measures its own baseline: the self-reported 0.001 decides nothing.
    executor = MemoryExecutor(lambda ws: float((ws / "sort.py").read_text().split("=")[1]))
    started = agent_mode.start(campaign, executor=executor)
    assert started.baseline == 10 and started.best == 10
    assert [r.status for r in Ledger(campaign.state_dir).read()] == ["baseline"]


@pytest.mark.parametrize("line", ["not json", "[1, 2]"])
def test_a_pi_log_that_is_not_one(tmp_path: Path, line: str) -> None:
    repo = repo_with(tmp_path, {"autoresearch.jsonl": line + "\n"})
    with pytest.raises(Exception, match="pi-autoresearch record"):
        import_pi(repo)
