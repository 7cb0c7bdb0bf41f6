"""Every proposer kind through the package's conformance suite."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autoresearch.proposers import REGISTRY
from autoresearch.proposers.base import Proposal, ProposalContext, Proposer
from autoresearch.testing import proposer_suite as suite


@pytest.fixture
def rigs(tmp_path: Path) -> Iterator[Callable[[str], suite.Rig]]:
    made: list[suite.Rig] = []

    def make(kind: str) -> suite.Rig:
        made.append(suite.make_rig(kind, tmp_path / kind))
        return made[-1]

    yield make
    for rig in made:
        rig.close()


def test_every_registered_kind_is_in_the_suite() -> None:
    assert set(suite.KINDS) == set(REGISTRY)


@pytest.mark.parametrize("check", sorted(suite.CHECKS))
@pytest.mark.parametrize("kind", sorted(suite.KINDS))
def test_proposer_kind(kind: str, check: str, rigs: Callable[[str], suite.Rig]) -> None:
    suite.CHECKS[check](rigs(kind))


@pytest.mark.parametrize("kind,mode", suite.failure_cases())
def test_a_broken_tool_is_a_failed_proposal(
    kind: str, mode: str, rigs: Callable[[str], suite.Rig]
) -> None:
    suite.check_a_broken_tool_is_a_failed_proposal(rigs(kind), mode)


# -- the suite on kinds of outside code: it passes an honest one and catches false claims --


def _set_n(workspace: Path, value: str) -> None:
    path = workspace / "calc.py"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(f"N = {value}" if ln.startswith("N =") else ln for ln in lines))


class Honest(Proposer):
    """Writes through its own code and says so; several threads may share it."""

    runs_commands = False
    parallel_safe = True

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def propose(self, ctx: ProposalContext) -> Proposal:
        with self.lock:
            self.count += 1
            value = str(self.count)
        _set_n(ctx.workspace, value)
        return Proposal(description=f"set N to {value}", params={"N": value})


class RunsWhatItDenies(Honest):
    def propose(self, ctx: ProposalContext) -> Proposal:
        subprocess.run(["sed", "-i", "s/^N = .*/N = 3/", "calc.py"], cwd=ctx.workspace, check=True)
        return Proposal(description="set N to 3")


class NotReallyParallelSafe(Honest):
    def __init__(self) -> None:
        super().__init__()
        self.busy = False

    def propose(self, ctx: ProposalContext) -> Proposal:
        if self.busy:
            raise RuntimeError("two proposals at once")
        self.busy = True
        try:
            time.sleep(0.3)
            return super().propose(ctx)
        finally:
            self.busy = False


class NotAProposer:
    runs_commands = False

    def propose(self, ctx: ProposalContext) -> Proposal:
        return Proposal()

    def observe(self, outcome: object) -> None:
        return None

    def close(self) -> None:
        return None


def _no_prompt(root: Path) -> suite.Tool:
    return suite.Tool(options={}, prompted=False)


def _outside(tmp_path: Path, kind: type) -> suite.Rig:
    return suite.make_rig("outside", tmp_path, create=lambda o, s: kind(), tool=_no_prompt)


def test_an_outside_kind_that_keeps_its_word_passes_the_whole_suite(tmp_path: Path) -> None:
    rig = _outside(tmp_path, Honest)
    try:
        suite.run_checks(rig)
    finally:
        rig.close()


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        (RunsWhatItDenies, "runs_commands = False but started"),
        (NotReallyParallelSafe, "raised RuntimeError"),
        (NotAProposer, "subclasses proposers.base.Proposer"),
    ],
)
def test_the_suite_catches_a_false_declaration(tmp_path: Path, kind: type, words: str) -> None:
    rig = _outside(tmp_path, kind)
    try:
        with pytest.raises(AssertionError, match=words):
            suite.run_checks(rig)
    finally:
        rig.close()
