"""The engine issue's acceptance scenario, end to end: `run` and `status` as a user runs them."""

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
