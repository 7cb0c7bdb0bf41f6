"""MLflow tracking as an event listener, fed events directly against a local file store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Cost, Status
from autoresearch.config import load_campaign
from autoresearch.events import Attempted, Event, PhaseChanged, Started, Stopped, Warned
from autoresearch.views.tracking import MlflowTracker, make_tracker
from conftest import git

mlflow = pytest.importorskip("mlflow")


@pytest.fixture(autouse=True)
def tracking_uri_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URI another test set in this process (`mlflow.set_tracking_uri`) would win over
    MLFLOW_TRACKING_URI; clear it for the test and put it back afterwards."""
    from mlflow.tracking._tracking_service import utils

    monkeypatch.setattr(utils, "_tracking_uri", None)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    yield store
    while mlflow.active_run() is not None:  # a failed test must not leave its run open
        mlflow.end_run()


def tracked(toy: Path) -> Path:
    config = toy / "autoresearch.toml"
    config.write_text(config.read_text() + '\n[tracking]\nmlflow = true\nexperiment = "exp"\n')
    (toy / ".autoresearch" / "toy").mkdir(parents=True)  # the engine makes it first
    return toy


def test_no_tracker_unless_the_config_asks(toy: Path) -> None:
    assert make_tracker(load_campaign(toy), lambda event: None) is None


def test_events_become_a_run_with_nested_attempt_runs(toy: Path, store: Path) -> None:
    campaign = load_campaign(tracked(toy))
    warnings: list[Event] = []
    tracker = make_tracker(campaign, warnings.append)
    assert isinstance(tracker, MlflowTracker)
    head = git(toy, "rev-parse", "HEAD").strip()
    (toy / "calc.py").write_text("N = 7\n")
    git(toy, "commit", "-qam", "seven")
    seven = git(toy, "rev-parse", "HEAD").strip()
    summary = {"name": "toy", "direction": "minimize", "best": 4.0}
    keep = AttemptRecord(
        1,
        Status.KEEP,
        metric=4.0,
        delta=-3.0,
        commit=seven,
        parent=head,
        files=("calc.py",),
        description="set N to 7",
        params={"N": 7},
        cost=Cost(usd=0.5, tokens_in=10, tokens_out=3),
    )
    crash = AttemptRecord(2, Status.CRASH, parent=seven, reason="exit 3")
    for event in (
        Started(summary, max_iterations=3, workspace=str(toy), resumed=False),
        Attempted(AttemptRecord(0, Status.BASELINE, metric=7.0, commit=head), 7.0, 3),
        PhaseChanged("proposing", 1),
        Attempted(keep, 4.0, 3),
        Warned("not tracked"),
        Attempted(crash, 4.0, 3),
        Stopped("max_iterations", summary, "", "autoresearch/toy", "l"),
    ):
        tracker(event)
    assert warnings == []

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("exp")
    runs = client.search_runs([experiment.experiment_id], max_results=10)
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert parent.data.tags["autoresearch.stop_reason"] == "max_iterations"
    assert parent.data.params["max_iterations"] == "3"
    assert parent.data.metrics["final_best"] == 4.0
    best = client.get_metric_history(parent.info.run_id, "best")
    assert [(int(m.step), m.value) for m in best] == [(0, 7.0), (1, 4.0), (2, 4.0)]
    children = {
        int(r.data.params["iteration"]): r for r in runs if "mlflow.parentRunId" in r.data.tags
    }
    assert sorted(children) == [0, 1, 2]
    one = children[1]
    assert one.data.params["status"] == "keep" and one.data.params["param.N"] == "7"
    assert one.data.params["files"] == "calc.py"
    assert one.data.metrics == {
        "metric": 4.0,
        "delta": -3.0,
        "cost_usd": 0.5,
        "tokens_in": 10.0,
        "tokens_out": 3.0,
    }
    assert [a.path for a in client.list_artifacts(one.info.run_id)] == ["attempt-1.diff"]
    two = children[2]
    assert two.data.params["status"] == "crash" and two.data.tags["reason"] == "exit 3"
    assert two.data.metrics == {} and client.list_artifacts(two.info.run_id) == []


def test_a_failing_server_warns_once_and_stops_tracking(
    toy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    warnings: list[Event] = []
    tracker = make_tracker(load_campaign(tracked(toy)), warnings.append)
    assert tracker is not None
    summary = {"name": "toy", "direction": "minimize", "best": None}
    tracker(Started(summary, max_iterations=1, workspace=str(toy), resumed=False))
    tracker(Attempted(AttemptRecord(0, Status.BASELINE, metric=7.0), 7.0, 1))
    tracker(Stopped("max_iterations", summary, "", "b", "l"))
    assert len(warnings) == 1
    warning = warnings[0]
    assert isinstance(warning, Warned) and warning.message.startswith("MLflow tracking stopped")
