"""What code written against earlier versions keeps: module names from before the package
had folders, the console script's entry point, and a proposer written against the bare
propose/observe/close protocol."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import autoresearch
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.proposers.base import Adapted, Outcome, Proposal, ProposalContext, as_proposer
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml
from conftest import make_repo
from unit.memory import MemoryExecutor, score


@pytest.mark.parametrize(("old", "new"), sorted(autoresearch.MOVED.items()))
def test_an_old_module_name_is_the_same_module_with_a_warning(old: str, new: str) -> None:
    # A fresh interpreter: this one may have imported the old name already.
    code = (
        "import warnings, importlib\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        f"new = importlib.import_module('autoresearch.{new}')\n"
        "try:\n"
        f"    importlib.import_module('autoresearch.{old}')\n"
        "except DeprecationWarning as w:\n"
        f"    assert 'autoresearch.{new}' in str(w), w\n"
        "else:\n"
        "    raise SystemExit('no warning')\n"
        "warnings.simplefilter('ignore')\n"
        f"assert importlib.import_module('autoresearch.{old}') is new\n"
        f"from autoresearch import {old} as via_package\n"
        "assert via_package is new\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_every_moved_name_points_at_a_module_that_exists() -> None:
    for new in autoresearch.MOVED.values():
        importlib.import_module(f"autoresearch.{new}")


def test_the_console_script_is_still_autoresearch_cli_main() -> None:
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "autoresearch"]
    assert script.value == "autoresearch.cli:main"
    assert script.load().name == "main"


class Bare:
    """A proposer of outside code that knows nothing of the base class."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.closed = 0

    def propose(self, ctx: ProposalContext) -> Proposal:
        (ctx.workspace / "calc.py").write_text("N = 3\n")
        return Proposal(description="set N to 3")

    def observe(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def close(self) -> None:
        self.closed += 1


def test_a_bare_proposer_runs_with_the_safe_declarations(tmp_path: Path) -> None:
    adapted = as_proposer(Bare())
    assert isinstance(adapted, Adapted)
    # It may run commands, unconfined, one slot at a time: the checkout is watched.
    assert adapted.runs_commands and not adapted.confined and not adapted.parallel_safe
    assert (
        not adapted.sealed and not adapted.exhausted() and adapted.preflight(tmp_path, True) == ""
    )
    config = campaign_toml(**{"metric.command": "metric", "guard": None, "stop.max_iterations": 1})
    repo = make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": "# judge\n", "autoresearch.toml": config},
    )
    bare = Bare()
    result = Engine(load_campaign(repo), proposer=bare, executor=MemoryExecutor(score)).run()  # type: ignore[arg-type]
    assert result.exit_code == 0, result.message
    assert Ledger(repo / ".autoresearch" / "toy").read()[-1].status.name == "KEEP"
    assert [o.status for o in bare.outcomes] == ["keep"] and bare.closed == 1
