"""`apply`, `branch` and `diff` take exactly the campaign's change: base -> attempt.

The toy campaign: 1 keep (N=7), 2 discard, 3 guard_failed (N=5), 4 crash, 5 scope_violation,
6 no_change, 7 keep (N=3, the target).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from autoresearch.views.dashboard import make_server
from conftest import Runner, git, snapshot


@pytest.fixture
def ran(toy: Path, invoke: Runner) -> Path:
    result = invoke(toy, "run")
    assert result.returncode == 0, result.stderr
    return toy


def commit_file(repo: Path, rel: str, data: bytes, message: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    git(repo, "add", rel)
    git(repo, "commit", "-qm", message)


def test_apply_keeps_the_users_later_commits_byte_for_byte(ran: Path, invoke: Runner) -> None:
    later = {
        "docs/notes.md": b"# written after the campaign started\n\x00binary\xff\n",
        "extra.py": b"print('mine')\n",
    }
    for rel, data in later.items():
        commit_file(ran, rel, data, f"add {rel}")
    (ran / "bench.py").write_text((ran / "bench.py").read_text() + "# tuned later\n")
    git(ran, "commit", "-qam", "edit the bench after the start")
    bench = (ran / "bench.py").read_bytes()
    head = git(ran, "rev-parse", "HEAD")
    result = invoke(ran, "apply", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"iteration": 7, "files": ["calc.py"]}
    for rel, data in later.items():
        assert (ran / rel).read_bytes() == data
    assert (ran / "bench.py").read_bytes() == bench
    assert (ran / "calc.py").read_text() == "# the number to tune\nN = 3\n"
    assert git(ran, "rev-parse", "HEAD") == head
    assert git(ran, "status", "--porcelain") == " M calc.py\n"


def test_apply_merges_three_way_beside_the_users_edit_of_the_same_file(
    ran: Path, invoke: Runner
) -> None:
    commit_file(ran, "calc.py", b'"""Mine."""\n\n# the number to tune\nN = 10\n', "a docstring")
    assert invoke(ran, "apply").returncode == 0
    assert (ran / "calc.py").read_text() == '"""Mine."""\n\n# the number to tune\nN = 3\n'


def test_a_conflicting_apply_names_the_file_and_changes_nothing(ran: Path, invoke: Runner) -> None:
    commit_file(ran, "calc.py", b"# the number to tune\nN = 11\n", "my own tuning")
    (ran / "untracked.txt").write_bytes(b"left alone\n")
    before = snapshot(ran)
    result = invoke(ran, "apply")
    assert result.returncode == 1
    assert "calc.py" in result.stderr and "nothing was changed" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(ran) == before


def test_apply_refuses_a_file_in_the_way_and_changes_nothing(ran: Path, invoke: Runner) -> None:
    # The campaign's change, from a commit whose tree lacks calc.py: the merge adds it,
    # and an untracked calc.py of the user's stands in the way.
    git(ran, "rm", "-q", "calc.py")
    git(ran, "commit", "-qm", "drop calc")
    (ran / "calc.py").write_bytes(b"mine\n")
    before = snapshot(ran)
    result = invoke(ran, "apply")
    assert result.returncode == 1 and "nothing was changed" in result.stderr
    assert snapshot(ran) == before


def test_diff_shows_the_campaigns_change_and_the_baseline_changes_nothing(
    ran: Path, invoke: Runner
) -> None:
    commit_file(ran, "later.txt", b"later\n", "a later commit")
    whole = invoke(ran, "diff")
    assert whole.returncode == 0
    assert "-N = 10" in whole.stdout and "+N = 3" in whole.stdout
    assert "later.txt" not in whole.stdout  # base -> best, not HEAD -> best
    baseline = invoke(ran, "diff", "0")
    assert baseline.returncode == 0 and "changed nothing" in baseline.stdout
    assert "diff --git" not in baseline.stdout
    own = invoke(ran, "diff", "7").stdout
    assert "-N = 7" in own and "+N = 3" in own  # attempt 7 against its parent


@pytest.mark.parametrize(("iteration", "status"), [(3, "guard_failed"), (4, "crash")])
def test_a_failed_attempt_needs_force(
    ran: Path, invoke: Runner, iteration: int, status: str
) -> None:
    before = snapshot(ran)
    for command in (["apply"], ["branch", "failed"]):
        refused = invoke(ran, *command, "--attempt", str(iteration))
        assert refused.returncode == 1, refused.stdout
        assert status in refused.stderr and "--force" in refused.stderr
    assert snapshot(ran) == before
    assert git(ran, "branch", "--list", "failed") == ""
    forced = invoke(ran, "branch", "failed", "--attempt", str(iteration), "--force")
    assert forced.returncode == 0, forced.stderr
    assert invoke(ran, "apply", "--attempt", str(iteration), "--force").returncode == 0
    expected = {3: "N = 5\n", 4: 'N = "x"\n'}[iteration]
    assert (ran / "calc.py").read_text().endswith(expected)


def test_a_scope_violation_is_refused_with_its_status(ran: Path, invoke: Runner) -> None:
    refused = invoke(ran, "apply", "--attempt", "5")
    assert refused.returncode == 1 and "scope_violation" in refused.stderr


def tamper(repo: Path, iteration: int, **fields: str) -> None:
    path = repo / ".autoresearch/toy/ledger.jsonl"
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        if record["iteration"] == iteration:
            record.update(fields)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def served_diff(repo: Path, iteration: int) -> tuple[int, str]:
    """GET /api/diff/<iteration> from the dashboard over `repo`'s campaign."""
    server = make_server(repo, repo / ".autoresearch/toy", "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api/diff/{iteration}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("field", ["commit", "parent"])
def test_a_ledger_commit_that_is_an_option_never_reaches_git(
    ran: Path, invoke: Runner, tmp_path: Path, field: str
) -> None:
    target = tmp_path / "written-by-git"
    tamper(ran, 1, **{field: f"--output={target}"})
    before = snapshot(ran)
    commands = [["diff", "1"]]
    if field == "commit":
        commands += [["apply", "--attempt", "1"], ["branch", "b", "--attempt", "1"], ["show", "1"]]
    for command in commands:
        result = invoke(ran, *command)
        assert not target.exists(), command
        assert "Traceback" not in result.stderr
        if command[0] != "show":
            assert result.returncode == 1 and "not a git object name" in result.stderr
    status, _ = served_diff(ran, 1)
    assert status != 200 and not target.exists()
    tamper(ran, 0, commit=f"--output={target}")
    for command in (["diff"], ["apply"]):
        result = invoke(ran, *command)
        assert result.returncode == 1 and not target.exists()
    assert snapshot(ran) == before
