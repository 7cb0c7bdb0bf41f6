"""MLflow tracking of a whole campaign and its resume, against a local tracking store.

In-process through the click runner; tracking fed events directly is test_tracking.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaigns import campaign_toml
from conftest import Runner, rewrite_config

mlflow = pytest.importorskip("mlflow")


def test_one_run_per_campaign_and_one_nested_run_per_attempt(
    toy: Path, invoke: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    proposer = toy.parent / "propose.sh"
    tracking = {"proposer.command": f"bash {proposer}", "tracking.mlflow": True}
    rewrite_config(toy, campaign_toml(**tracking, **{"tracking.experiment": "exp"}), "tracking")
    store = tmp_path / "mlruns"
    env = {"MLFLOW_TRACKING_URI": store.as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}
    first = invoke(toy, "run", "--max-iterations", "3", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    second = invoke(toy, "run", env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "MLflow tracking stopped" not in second.stdout

    mlflow.set_tracking_uri(store.as_uri())
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("exp")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1, "a resumed campaign continues its run"
    parent = parents[0]
    assert parent.data.tags["autoresearch.stop_reason"] == "target"
    history = client.get_metric_history(parent.info.run_id, "best")
    assert [int(m.step) for m in history] == list(range(8))
    assert history[-1].value == 0
    assert len(children) == 8
    by_iteration = {int(r.data.params["iteration"]): r for r in children}
    one = by_iteration[1]
    assert one.data.params["status"] == "keep"
    assert one.data.params["description"] == "set N to 7"
    assert one.data.metrics["metric"] == 4
    artifacts = [a.path for a in client.list_artifacts(one.info.run_id)]
    assert "attempt-1.diff" in artifacts
    text = Path(client.download_artifacts(one.info.run_id, "attempt-1.diff", str(tmp_path)))
    assert "+N = 7" in text.read_text()
