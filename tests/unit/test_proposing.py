"""The checkout watch while a proposer that runs commands works: a write to the user's
checkout, or through a shared link, halts the campaign. In-process through the click runner."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Runner, git, ledger, statuses
from unit.test_sandbox import sandbox_repo


def test_a_proposer_writing_to_the_users_checkout_halts(tmp_path: Path, invoke: Runner) -> None:
    repo = sandbox_repo(
        tmp_path, "print(1)\n", {}, proposer="echo oops >> $AUTORESEARCH_WORKSPACE/../../../calc.py"
    )
    result = invoke(repo, "run")
    assert result.returncode == 3
    assert statuses(repo, "s") == ["baseline", "checkout_changed"]
    assert "calc.py" in ledger(repo, "s")[1]["reason"]
    assert "checkout changed" in result.stdout
    assert json.loads(invoke(repo, "status", "--json").stdout)["stop_reason"] == "checkout_changed"


def test_writing_through_a_shared_link_halts(tmp_path: Path, invoke: Runner) -> None:
    repo = sandbox_repo(
        tmp_path,
        "print(open('data/x.txt').read().count('a'))\n",
        {},
        proposer="echo aaaa >> data/x.txt",
        share=["data"],
    )
    (repo / ".gitignore").write_text("data/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "share")
    (repo / "data").mkdir()
    (repo / "data/x.txt").write_text("a\n")
    result = invoke(repo, "run")
    assert result.returncode == 3
    record = ledger(repo, "s")[1]
    assert record["status"] == "checkout_changed" and "data (shared)" in record["reason"]
