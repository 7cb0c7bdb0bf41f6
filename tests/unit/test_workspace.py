"""The worktree's git bookkeeping: every attempt stays reachable under its own ref."""

from __future__ import annotations

from pathlib import Path

from conftest import Runner, git, ledger


def test_every_attempt_stays_reachable_under_its_ref(toy: Path, invoke: Runner) -> None:
    assert invoke(toy, "run").returncode == 0
    for record in ledger(toy):
        if record["commit"] is None or record["status"] == "scope_violation":
            continue
        ref = f"refs/autoresearch/toy/{record['iteration']}"
        assert git(toy, "rev-parse", ref).strip() == record["commit"]
    assert 'N = "x"' in git(toy, "show", "refs/autoresearch/toy/4:calc.py")
    # Out-of-scope content is not kept under a ref (a screened candidate has none).
    assert git(toy, "for-each-ref", "refs/autoresearch/toy/5") == ""
    # A rolled-back attempt's parent is the incumbent it was tried against.
    records = ledger(toy)
    assert records[2]["parent"] == records[1]["commit"]
