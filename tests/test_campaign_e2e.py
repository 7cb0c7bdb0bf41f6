"""The engine issue's acceptance scenario, end to end through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner, git, ledger, snapshot, statuses

EXPECTED = [
    "baseline",
    "keep",
    "discard",
    "guard_failed",
    "crash",
    "scope_violation",
    "no_change",
    "keep",
]


def test_toy_campaign_reaches_target_and_leaves_checkout_untouched(toy: Path, cli: Runner) -> None:
    before = snapshot(toy)
    result = cli(toy, "run")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr

    assert statuses(toy) == EXPECTED
    records = ledger(toy)
    assert [r["iteration"] for r in records] == list(range(8))
    assert [r["metric"] for r in records] == [7, 4, 6, 2, None, None, None, 0]
    for record in records:
        for key in (
            "iteration",
            "status",
            "metric",
            "commit",
            "parent",
            "files",
            "description",
            "utc",
            "propose_seconds",
            "measure_seconds",
        ):
            assert key in record, key
    assert records[1]["files"] == ["calc.py"]
    assert records[5]["files"] == ["notes.txt"]
    assert records[6]["commit"] is None
    assert records[1]["description"] == "set N to 7"
    assert records[1]["diffstat"] == "calc.py +1/-1"
    prompt = (toy / ".autoresearch/toy/prompts/0002.md").read_text()
    assert "set N to 7 (calc.py +1/-1)" in prompt and "make the score zero" in prompt
    assert "bench.py" in prompt  # named as the harness not to touch

    status = json.loads(cli(toy, "status", "--json").stdout)
    assert status["stop_reason"] == "target"
    assert status["baseline"] == 7 and status["best"] == 0
    assert status["best_iteration"] == 7
    assert status["iterations"] == 7
    assert status["counts"]["keep"] == 2
    assert status["best_commit"] == git(toy, "rev-parse", "autoresearch/toy").strip()

    assert git(toy, "show", "autoresearch/toy:calc.py").endswith("N = 3\n")
    assert snapshot(toy) == before

    tsv = (toy / ".autoresearch/toy/results.tsv").read_text().splitlines()
    assert tsv[0] == "iteration\tcommit\tmetric\tdelta\tstatus\tdescription"
    assert len(tsv) == 9


def test_every_attempt_stays_reachable_under_its_ref(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run").returncode == 0
    for record in ledger(toy):
        if record["commit"] is None:
            continue
        ref = f"refs/autoresearch/toy/{record['iteration']}"
        assert git(toy, "rev-parse", ref).strip() == record["commit"]
    assert 'N = "x"' in git(toy, "show", "refs/autoresearch/toy/4:calc.py")
    assert git(toy, "show", "refs/autoresearch/toy/5:notes.txt") == "hi\n"
    # A rolled-back attempt's parent is the incumbent it was tried against.
    records = ledger(toy)
    assert records[2]["parent"] == records[1]["commit"]


def test_resume_continues_numbering_without_repeating(toy: Path, cli: Runner) -> None:
    first = cli(toy, "run", "--max-iterations", "2")
    assert first.returncode == 0, first.stderr
    assert statuses(toy) == EXPECTED[:3]
    assert json.loads(cli(toy, "status", "--json").stdout)["stop_reason"] == "max_iterations"

    second = cli(toy, "run", "--max-iterations", "4")
    assert second.returncode == 0, second.stderr
    assert "resuming" in second.stdout
    records = ledger(toy)
    assert [r["iteration"] for r in records] == [0, 1, 2, 3, 4]
    assert statuses(toy) == EXPECTED[:5]
    assert git(toy, "show", "autoresearch/toy:calc.py").endswith("N = 7\n")

    # Already at the cap: nothing more happens, exit 0.
    third = cli(toy, "run", "--max-iterations", "4")
    assert third.returncode == 0
    assert len(ledger(toy)) == 5

    fourth = cli(toy, "run")
    assert fourth.returncode == 0
    assert statuses(toy) == EXPECTED
    assert [r["iteration"] for r in ledger(toy)] == list(range(8))


def test_log_lists_attempts(toy: Path, cli: Runner) -> None:
    assert cli(toy, "run", "--max-iterations", "3").returncode == 0
    table = cli(toy, "log")
    assert table.returncode == 0
    assert "guard_failed" in table.stdout and "set N to 7" in table.stdout
    data = json.loads(cli(toy, "log", "--json").stdout)
    assert [r["status"] for r in data] == EXPECTED[:4]
