"""The campaign knows what it can detect: at the start it says the smallest gain it keeps 4
times in 5 at its measured noise, and warns once, with what to do, when that is coarser than
the gains looked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.events import Event, Noted, Warned
from autoresearch.stats.decide import Noise, Rule, detectable_gain
from autoresearch.views.status import campaign_status
from campaigns import campaign_toml
from conftest import make_repo
from unit.memory import MemoryExecutor, ScriptedProposer, set_n


def run(tmp_path: Path, spread: list[float], **overrides: object) -> tuple[list[Event], Path]:
    values = iter(spread * 50)
    executor = MemoryExecutor(lambda workspace: next(values))
    config = campaign_toml(
        **{
            "metric.command": "metric",
            "metric.target": None,
            "guard": None,
            "decision.rule": None,
            "stop.max_iterations": 1,
            **overrides,
        }
    )
    repo = make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 10\n", "bench.py": "# judge\n", "autoresearch.toml": config},
    )
    events: list[Event] = []
    engine = Engine(
        load_campaign(repo),
        proposer=ScriptedProposer(set_n("9")),
        executor=executor,
        on_event=events.append,
    )
    engine.run()
    return events, repo


def test_a_noisy_benchmark_is_told_what_it_cannot_see_and_what_to_do(tmp_path: Path) -> None:
    events, repo = run(tmp_path, [100.0, 80.0, 121.0, 95.0, 104.0, 88.0])
    notes = [e.message for e in events if isinstance(e, Noted)]
    warnings = [e.message for e in events if isinstance(e, Warned)]
    assert any(n.startswith("detectable: gains of about") for n in notes), notes
    unstable = [w for w in warnings if w.startswith("unstable benchmark")]
    assert len(unstable) == 1, warnings
    assert "CPU time" in unstable[0] and "exclusive" in unstable[0]
    status = campaign_status(repo / ".autoresearch" / "toy")
    assert str(status["detectable"]).startswith("detectable: gains of about")


def test_a_quiet_benchmark_gets_the_figure_and_no_warning(tmp_path: Path) -> None:
    events, _ = run(tmp_path, [100.0, 100.2, 99.8, 100.1, 99.9, 100.05])
    notes = [e.message for e in events if isinstance(e, Noted)]
    assert any(n.startswith("detectable:") for n in notes), notes
    assert not [e for e in events if isinstance(e, Warned) and "unstable" in e.message]


def test_a_min_delta_finer_than_the_noise_allows_is_warned(tmp_path: Path) -> None:
    events, _ = run(
        tmp_path, [100.0, 100.2, 99.8, 100.1, 99.9, 100.05], **{"decision.min_delta": "0.01%"}
    )
    warned = [e.message for e in events if isinstance(e, Warned) and "unstable" in e.message]
    assert len(warned) == 1 and "min_delta" in warned[0], warned


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
def test_the_detectable_gain_grows_with_the_noise_and_shrinks_with_more_runs(
    sigma: float,
) -> None:
    noise = Noise(sigma, 12)
    few = detectable_gain(Rule("sequential", max_samples=4), noise)
    many = detectable_gain(Rule("sequential", max_samples=12), noise)
    assert few is not None and many is not None and many < few
    wider = detectable_gain(Rule("sequential"), Noise(sigma * 2, 12))
    narrower = detectable_gain(Rule("sequential"), noise)
    assert wider is not None and narrower is not None and wider > narrower
    assert detectable_gain(Rule("strict"), noise) is None
    assert detectable_gain(Rule("sequential"), Noise(0.0, 12)) is None
