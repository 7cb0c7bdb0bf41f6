"""`run` says on resume what changed since the last run (a halt it goes on from, commits
on the user's HEAD that the campaign's base lacks); with several jobs, an attempt cut off
by another slot's tamper halt says so; an idea an agent adds carries no attempt tag."""

from __future__ import annotations

from pathlib import Path

from autoresearch.attempt import Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.store.ledger import Ledger
from campaigns import script_campaign
from conftest import Runner, commit_all

# Attempt 1 rewrites the judge at once; attempt 2 is still proposing when that halts it.
TAMPER_WHILE_ANOTHER_RUNS = """case "$AUTORESEARCH_ITERATION" in
  1) echo "print(0)" > bench.py;;
  2) sleep 20; sed -i "s/^N = .*/N = 5/" calc.py;;
  *) sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py;;
esac
"""


def test_a_tamper_halt_names_itself_in_the_attempt_it_cut_off(tmp_path: Path) -> None:
    repo = script_campaign(tmp_path, TAMPER_WHILE_ANOTHER_RUNS, **{"stop.max_iterations": 4})
    result = Engine(load_campaign(repo), jobs=2).run()
    assert result.stop_reason == "tampered" and result.exit_code == 3
    by = {r.iteration: r for r in Ledger(repo / ".autoresearch" / "t").read()}
    assert by[1].status is Status.TAMPERED
    assert by[2].status is Status.INTERRUPTED
    assert by[2].reason is not None and "signal" not in by[2].reason
    assert by[2].reason.startswith("cut off when attempt 1 halted the campaign (tampered: ")


def test_a_resume_says_the_halt_and_the_new_commits(tmp_path: Path, invoke: Runner) -> None:
    script = 'case "$AUTORESEARCH_ITERATION" in\n  1) echo "print(0)" > bench.py;;\n'
    script += '  *) sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py;;\nesac\n'
    repo = script_campaign(tmp_path, script)
    first = invoke(repo, "run", "--plain")
    assert first.returncode == 3
    assert "resuming" not in first.stdout + first.stderr
    assert "HEAD has" not in first.stdout + first.stderr

    (repo / "README.md").write_text("a commit of the user's own\n")
    commit_all(repo, "docs")
    (repo / "NOTES.md").write_text("and another\n")
    commit_all(repo, "notes")
    again = invoke(repo, "run", "--plain", "--max-iterations", "2")
    said = again.stdout + again.stderr
    assert "resuming campaign 't' after it halted (tampered: " in said
    assert "your HEAD has 2 commits that the campaign's base" in said

    third = invoke(repo, "run", "--plain", "--max-iterations", "3")
    said = third.stdout + third.stderr
    assert "after it halted" not in said  # it finished: no halt to go on from
    assert "your HEAD has" not in said  # said once for these commits
