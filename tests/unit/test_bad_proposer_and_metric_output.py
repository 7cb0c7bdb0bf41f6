"""Bad input from the proposer or the metric never stops the engine: each attempt gets a
clear status and a reason, reads stay bounded, and the ledger stays valid JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from autoresearch.attempt import Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.executors import LocalExecutor
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import make_repo
from unit.memory import MemoryExecutor, ScriptedProposer, score, set_n

TIMEOUT = 3.0


def repo_with(tmp_path: Path, measure: str, **overrides: Any) -> Path:
    """The toy campaign measured by `measure.sh` (a harness file), run for real."""
    config = campaign_toml(
        **{
            "metric.command": "bash measure.sh",
            "metric.timeout": TIMEOUT,
            "metric.target": None,
            "metric.pattern": None,
            "guard": None,
            "harness": ["measure.sh"],
            **overrides,
        }
    )
    return make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "measure.sh": measure, "autoresearch.toml": config},
    )


def run(repo: Path, *edits: Any, executor: Any = None, total: int = 1) -> list[Any]:
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(*edits),  # type: ignore[arg-type]
        executor=executor or LocalExecutor(),
        max_iterations=total,
    )
    engine.run()
    return Ledger(repo / ".autoresearch" / "toy").read()


def ledger_lines(repo: Path) -> list[dict[str, Any]]:
    raw = (repo / ".autoresearch" / "toy" / "ledger.jsonl").read_bytes()
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


# The candidate (N = 7) makes the metric file something no metric file should be.
FILE_CASES = {
    "a symlink to /dev/zero": ("ln -sf /dev/zero out.txt", "out.txt is a link out of the folder"),
    "a pipe": ("mkfifo out.txt", "out.txt is not a regular file"),
    "a huge file": ("truncate -s 40M out.txt", "more than a metric file may hold"),
    "a folder": ("mkdir out.txt", "out.txt is not a regular file"),
}


@pytest.mark.parametrize("case", FILE_CASES)
def test_a_metric_file_that_is_no_file_is_a_crash_with_its_reason(
    tmp_path: Path, case: str
) -> None:
    make, reason = FILE_CASES[case]
    measure = (
        "rm -rf out.txt\n"
        f"if grep -q 'N = 7' calc.py; then {make}; else echo 'score: 4' > out.txt; fi\n"
    )
    repo = repo_with(tmp_path, measure, **{"metric.file": "out.txt"})
    started = time.monotonic()
    records = run(repo, set_n("7"))
    assert time.monotonic() - started < TIMEOUT + 20
    assert [r.status for r in records] == [Status.BASELINE, Status.CRASH]
    assert reason in records[-1].reason


def test_a_backtracking_pattern_ends_at_the_metric_timeout(tmp_path: Path) -> None:
    # The pattern reads "4" at once, and backtracks without end on a line of 5000 a's
    # (`(a|aa)+` splits it in every way before giving up), in any regex engine.
    measure = "if grep -q 'N = 7' calc.py; then printf 'a%.0s' $(seq 5000); echo; else echo 4; fi\n"
    repo = repo_with(tmp_path, measure, **{"metric.pattern": r"^(\d+|(?:a|aa)+b)$"})
    events: list[Any] = []
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(set_n("7")),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        on_event=events.append,
        max_iterations=1,
    )
    engine.run()  # the baseline
    records = Ledger(repo / ".autoresearch" / "toy").read()
    assert records[0].metric == 4
    assert records[-1].status is Status.CRASH
    crash = records[-1]
    assert re.search(r"was still matching after [23]\.\d s", crash.reason), crash.reason
    assert crash.timings is not None and crash.timings.measure < TIMEOUT + 5


def proposer_names(name: bytes, description: str = "") -> Any:
    def edit(workspace: Path) -> Proposal:
        os.makedirs(workspace, exist_ok=True)
        with open(os.path.join(os.fsencode(workspace), name), "wb") as handle:
            handle.write(b"N = 7\n")
        return Proposal(description=description)

    return edit


def toy_repo(tmp_path: Path, scope: list[str]) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "# the judge\n",
            "autoresearch.toml": campaign_toml(
                scope=scope, **{"metric.command": "metric", "guard": None}
            ),
        },
    )


NAME = b"calc\xff\xfe.py"
DESCRIPTION = "a file named \udcff\udcfe with a NUL \0 in its description"


@pytest.mark.parametrize("scope", [["calc.py"], ["calc*"]])
def test_a_file_name_that_is_not_utf8_is_judged_and_logged(
    tmp_path: Path, scope: list[str]
) -> None:
    repo = toy_repo(tmp_path, scope)
    records = run(repo, proposer_names(NAME, DESCRIPTION), executor=MemoryExecutor(score))
    assert records[0].status is Status.BASELINE
    # Out of scope it is a scope violation; in scope it is an ordinary candidate whose
    # metric (calc.py is unchanged) is no better.
    expected = Status.SCOPE_VIOLATION if scope == ["calc.py"] else Status.DISCARD
    assert records[1].status is expected, records[1]
    lines = ledger_lines(repo)  # strict UTF-8, and JSON
    assert lines[1]["files"] == [NAME.decode("utf-8", "surrogateescape")]
    assert lines[1]["description"] == DESCRIPTION
    assert list(records[1].files) == lines[1]["files"]
    tsv = (repo / ".autoresearch" / "toy" / "results.tsv").read_bytes().decode("utf-8")
    assert len(tsv.splitlines()) == 3
    report = verify_campaign(repo, repo / ".autoresearch" / "toy", "toy")
    assert report.ok, report.problems
    if records[1].commit:
        names = subprocess.run(
            ["git", "show", "-z", "--name-only", "--format=", records[1].commit],
            cwd=repo,
            capture_output=True,
            check=True,
        ).stdout
        assert names.strip(b"\0\n") == NAME


def test_the_attempt_after_a_non_utf8_name_runs_normally(tmp_path: Path) -> None:
    repo = toy_repo(tmp_path, ["calc*"])
    records = run(
        repo, proposer_names(NAME, DESCRIPTION), set_n("7"), executor=MemoryExecutor(score), total=2
    )
    assert [r.status for r in records][2] is Status.KEEP
