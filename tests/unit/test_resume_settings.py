"""Resume after the config changed: what is measured must be the same, everything else may
change. A campaign started by 0.1.0 (one digest for all settings) still resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.errors import ConfigError
from autoresearch.store.ledger import Ledger
from campaigns import campaign_toml, v1_campaign
from conftest import make_repo
from unit.memory import MemoryExecutor, ScriptedProposer, score, set_n

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ledger_v1"
BASE = {"metric.command": "metric", "guard.command": "guard", "metric.target": None}


def toy(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "N = 10\n",
            "bench.py": "# the judge\n",
            "autoresearch.toml": campaign_toml(**BASE),
        },
    )


def run(repo: Path, total: int, *edits: Any) -> list[int]:
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(*edits),  # type: ignore[arg-type]
        executor=MemoryExecutor(score),
        max_iterations=total,
    )
    engine.run()
    return [r.iteration for r in Ledger(repo / ".autoresearch" / "toy").read()]


def reconfigure(repo: Path, **overrides: Any) -> None:
    (repo / "autoresearch.toml").write_text(campaign_toml(**{**BASE, **overrides}))


@pytest.mark.parametrize(
    "overrides",
    [
        {"metric.timeout": 5},
        {"guard.timeout": 7},
        {"stop.plateau": 3, "stop.max_minutes": 30},
        {"decision.rule": "repeats", "decision.repeats": 3},
        {"proposer.command": "bash other.sh", "goal": "another goal"},
        {"sandbox.cpu_seconds": 100},
    ],
)
def test_settings_that_do_not_change_a_number_let_the_campaign_resume(
    tmp_path: Path, overrides: dict[str, Any]
) -> None:
    repo = toy(tmp_path)
    assert run(repo, 1, set_n("7")) == [0, 1]
    reconfigure(repo, **overrides)
    assert run(repo, 2, set_n("6")) == [0, 1, 2]


@pytest.mark.parametrize(
    "overrides,named",
    [
        ({"metric.command": "metric --fast"}, "metric.command"),
        ({"metric.direction": "maximize"}, "metric.direction"),
        ({"metric.pattern": "N=([0-9]+)"}, "metric.pattern"),
        ({"guard": None}, "guard.command"),
    ],
)
def test_a_changed_measurement_setting_is_named_and_refused(
    tmp_path: Path, overrides: dict[str, Any], named: str
) -> None:
    repo = toy(tmp_path)
    run(repo, 1, set_n("7"))
    state = repo / ".autoresearch" / "toy"
    ledger = (state / "ledger.jsonl").read_bytes()
    reconfigure(repo, **overrides)
    with pytest.raises(ConfigError) as info:
        run(repo, 2, set_n("6"))
    message = str(info.value)
    assert message == (
        f"the measurement settings changed since campaign 'toy' started ({named}); numbers "
        "would not be comparable. Restore them in autoresearch.toml, or start a new "
        "campaign under another name."
    )
    assert (state / "ledger.jsonl").read_bytes() == ledger, "nothing was logged"


def test_a_changed_harness_is_named_with_its_files(tmp_path: Path) -> None:
    repo = toy(tmp_path)
    run(repo, 1, set_n("7"))
    reconfigure(repo, harness=[])
    with pytest.raises(ConfigError, match=r" started \(harness, harness file bench.py\); "):
        run(repo, 2, set_n("6"))


def _clone_v1(tmp_path: Path) -> Path:
    return v1_campaign(tmp_path)


def _v1_engine(repo: Path, total: int) -> Engine:
    return Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(set_n("3")),  # type: ignore[arg-type]
        executor=MemoryExecutor(score),
        max_iterations=total,
    )


def test_a_0_1_0_fingerprint_is_checked_then_written_in_todays_form(tmp_path: Path) -> None:
    repo = _clone_v1(tmp_path)
    state = repo / ".autoresearch" / "toy" / "state.json"
    assert isinstance(json.loads(state.read_text())["fingerprint"]["settings"], str)
    _v1_engine(repo, 9).run()
    fingerprint = json.loads(state.read_text())["fingerprint"]
    assert fingerprint["measurement"]["metric.command"]
    assert set(fingerprint["files"]) == {"bench.py"}
    # Now the campaign carries a digest per key: a timeout change passes.
    text = (repo / "autoresearch.toml").read_text()
    (repo / "autoresearch.toml").write_text(text.replace("[metric]", "[metric]\ntimeout = 9"))
    result = _v1_engine(repo, 10).run()
    assert result.stop_reason == "target"
    assert [r.iteration for r in Ledger(repo / ".autoresearch" / "toy").read()] == list(range(10))


def test_a_0_1_0_fingerprint_refuses_a_changed_measurement(tmp_path: Path) -> None:
    repo = _clone_v1(tmp_path)
    text = (repo / "autoresearch.toml").read_text()
    (repo / "autoresearch.toml").write_text(
        text.replace("pattern = 'score: ([-+0-9.eE]+)'", "pattern = 'score=([0-9.]+)'")
    )
    ledger = (repo / ".autoresearch" / "toy" / "ledger.jsonl").read_bytes()
    with pytest.raises(ConfigError) as info:
        _v1_engine(repo, 9).run()
    assert str(info.value) == (
        "the measurement settings changed since campaign 'toy' started (metric, guard, "
        "decision or judge settings, recorded by 0.1.0 as one digest); numbers would not be "
        "comparable. Restore them in autoresearch.toml, or start a new campaign under "
        "another name."
    )
    assert (repo / ".autoresearch" / "toy" / "ledger.jsonl").read_bytes() == ledger
