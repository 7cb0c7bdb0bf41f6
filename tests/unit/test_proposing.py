"""A proposer that runs commands and writes to the user's checkout, directly or through a
shared link: in the sandbox the write cannot happen; without one the checkout watch sees it
and halts the campaign. Either way the user's file is what it was. In-process through the
click runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.isolation.sandbox import bwrap_problem
from conftest import Runner, git, ledger, statuses
from unit.test_sandbox import sandbox_repo

MODES = [
    "none",
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(bwrap_problem() is not None, reason="no bubblewrap")
    ),
]


@pytest.mark.parametrize("isolation", MODES)
def test_a_proposer_writing_to_the_users_checkout(
    tmp_path: Path, invoke: Runner, isolation: str
) -> None:
    repo = sandbox_repo(
        tmp_path,
        "print(1)\n",
        {"isolation": isolation},
        proposer="echo oops >> $AUTORESEARCH_WORKSPACE/../../../calc.py",
    )
    before = (repo / "calc.py").read_bytes()
    result = invoke(repo, "run")
    if isolation == "none":
        assert result.returncode == 3
        assert statuses(repo, "s") == ["baseline", "checkout_changed"]
        assert "calc.py" in ledger(repo, "s")[1]["reason"]
        assert "checkout changed" in result.stdout
        status = json.loads(invoke(repo, "status", "--json").stdout)
        assert status["stop_reason"] == "checkout_changed"
    else:
        assert result.returncode == 0, result.stdout + result.stderr
        assert (repo / "calc.py").read_bytes() == before
        assert statuses(repo, "s")[1] in ("proposer_failed", "no_change")


@pytest.mark.parametrize("isolation", MODES)
def test_writing_through_a_shared_link(tmp_path: Path, invoke: Runner, isolation: str) -> None:
    repo = sandbox_repo(
        tmp_path,
        "print(open('data/x.txt').read().count('a'))\n",
        {"isolation": isolation},
        proposer="echo aaaa >> data/x.txt",
        share=["data"],
    )
    (repo / ".gitignore").write_text("data/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "share")
    (repo / "data").mkdir()
    (repo / "data/x.txt").write_text("a\n")
    result = invoke(repo, "run")
    if isolation == "none":
        assert result.returncode == 3
        record = ledger(repo, "s")[1]
        assert record["status"] == "checkout_changed" and "data (shared)" in record["reason"]
    else:
        assert result.returncode == 0, result.stdout + result.stderr
        assert (repo / "data/x.txt").read_text() == "a\n"
        assert statuses(repo, "s")[1] in ("proposer_failed", "no_change")
