"""`[sandbox] isolation`: what is in force, said where users look; refused when it cannot be
honoured; and a measurement that reaches for the user's checkout finds nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.errors import ConfigError
from autoresearch.executors import LocalExecutor
from autoresearch.isolation.sandbox import Bwrap, NoSandbox, bwrap_problem, choose_sandbox
from autoresearch.store.ledger import Ledger
from autoresearch.testing.repo import make_repo
from campaigns import campaign_toml
from unit.memory import ScriptedProposer, set_n

needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))


def test_bwrap_without_bubblewrap_is_refused_in_one_sentence() -> None:
    with pytest.raises(ConfigError) as caught:
        choose_sandbox("bwrap", "autoresearch.toml", executable="/nonexistent/bwrap")
    message = str(caught.value)
    assert message.startswith("autoresearch.toml: key 'sandbox.isolation': \"bwrap\" needs")
    assert "apt install bubblewrap" in message and "\n" not in message


def test_auto_without_bubblewrap_runs_unprotected_and_says_so() -> None:
    sandbox, warning = choose_sandbox("auto", "autoresearch.toml", executable="/nonexistent")
    assert isinstance(sandbox, NoSandbox)
    assert warning is not None and "without isolation" in warning and "not installed" in warning
    assert choose_sandbox("none", "x")[1] is None


@needs_bwrap
def test_auto_uses_bubblewrap_where_it_works() -> None:
    assert isinstance(choose_sandbox("auto", "x")[0], Bwrap)


# The candidate reads a secret from the user's checkout (an ignored .env beside the
# repository's files) and, if it can, claims a perfect score.
CHEAT = """\
import pathlib
N = 10
env = pathlib.Path(__file__).resolve().parents[3] / ".env"
try:
    if "hunter2" in env.read_text():
        N = 3
except OSError:
    pass
"""


def campaign(tmp_path: Path, isolation: str) -> Path:
    config = campaign_toml(
        guard=None,
        sandbox={"isolation": isolation},
        **{"metric.target": None},
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": 'import calc\nprint(f"score: {abs(calc.N - 3)}")\n',
            "autoresearch.toml": config,
            ".gitignore": ".env\n",
        },
    )
    (repo / ".env").write_text("TOKEN=hunter2\n")
    return repo


def cheat(workspace: Path) -> None:
    (workspace / "calc.py").write_text(CHEAT)


def run_once(repo: Path, edit: Callable[[Path], object]) -> tuple[AttemptRecord, str]:
    """One real attempt; its record and the isolation state.json says was in force."""
    Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(edit),  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=1,
    ).run()
    folder = repo / ".autoresearch" / "toy"
    state = json.loads((folder / "state.json").read_text())
    return Ledger(folder).read()[-1], state["isolation"]


@needs_bwrap
def test_in_the_sandbox_the_checkout_is_out_of_reach(tmp_path: Path) -> None:
    record, isolation = run_once(campaign(tmp_path, "bwrap"), cheat)
    assert record.metric == 7 and record.status is Status.DISCARD
    assert isolation == "bwrap"


def test_without_a_sandbox_the_same_cheat_is_not_stopped(tmp_path: Path) -> None:
    # Said plainly: isolation = "none" does not protect the checkout.
    record, isolation = run_once(campaign(tmp_path, "none"), cheat)
    assert record.metric == 0 and isolation == "none"


def test_the_report_says_which_isolation_was_in_force(tmp_path: Path) -> None:
    from autoresearch.views.report import gather, render_markdown

    repo = campaign(tmp_path, "none")
    run_once(repo, set_n("7"))
    text = render_markdown(gather(repo / ".autoresearch" / "toy"), None)
    assert "- isolation of the proposer's commands, metric and guard: none" in text
