"""MLflow tracking: one run per campaign, one nested run per attempt.

The campaign run logs the metric and the best so far at every iteration; each attempt's
nested run holds its parameters (status, description, commit, files, proposer values),
its numbers (metric, cost, tokens) and its diff as an artifact. MLFLOW_TRACKING_URI is
honoured. A tracking failure is reported once and never stops the campaign.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autoresearch.config import Campaign
from autoresearch.errors import ConfigError
from autoresearch.results import diff as attempt_diff

Event = Callable[[str, dict[str, Any]], None]


def fan_out(*handlers: Event | None) -> Event:
    """One event callback that calls several."""
    active = [h for h in handlers if h is not None]

    def emit(kind: str, data: dict[str, Any]) -> None:
        for handler in active:
            handler(kind, data)

    return emit


class MlflowTracker:
    def __init__(self, campaign: Campaign, warn: Event) -> None:
        try:
            import mlflow
        except ImportError:
            raise ConfigError(
                f"{campaign.display_path()}: key 'tracking.mlflow' needs MLflow; install it "
                "with `pip install 'autoresearch[mlflow]'`."
            ) from None
        self.mlflow = mlflow
        self.campaign = campaign
        self.warn = warn
        self.run_file = campaign.state_dir / "mlflow_run_id"
        self.run_id: str | None = None
        self.failed = False

    def _guard(self, action: Callable[[], None]) -> None:
        if self.failed:
            return
        try:
            action()
        except Exception as exc:  # a tracking server's trouble is not the campaign's
            self.failed = True
            self.warn("warning", {"message": f"MLflow tracking stopped: {exc}"})

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "start":
            self._guard(lambda: self._start(data))
        elif kind == "attempt":
            self._guard(lambda: self._attempt(data["record"], data.get("best")))
        elif kind == "stop":
            self._guard(lambda: self._stop(data))

    def _start(self, data: dict[str, Any]) -> None:
        mlflow = self.mlflow
        tracking = self.campaign.config.tracking
        mlflow.set_experiment(tracking.experiment or f"autoresearch-{self.campaign.name}")
        previous = self.run_file.read_text().strip() if self.run_file.exists() else None
        if previous:
            run = mlflow.start_run(run_id=previous)
        else:
            run = mlflow.start_run(run_name=self.campaign.name)
            self.run_file.write_text(run.info.run_id, encoding="utf-8")
        self.run_id = run.info.run_id
        cfg = self.campaign.config
        mlflow.set_tags(
            {
                "autoresearch.campaign": self.campaign.name,
                "autoresearch.direction": str(cfg.metric.direction),
                "autoresearch.proposer": cfg.proposer.kind,
                "autoresearch.rule": cfg.decision.rule,
            }
        )
        if not previous:
            mlflow.log_params(
                {
                    "goal": cfg.goal[:250],
                    "metric_command": str(cfg.metric.command or "judge")[:250],
                    "scope": ",".join(cfg.scope)[:250],
                    "max_iterations": data.get("max_iterations"),
                }
            )

    def _attempt(self, record: dict[str, Any], best: float | None) -> None:
        mlflow = self.mlflow
        step = int(record.get("iteration", 0))
        if record.get("metric") is not None:
            mlflow.log_metric("metric", float(record["metric"]), step=step)
        if best is not None:
            mlflow.log_metric("best", float(best), step=step)
        with mlflow.start_run(run_name=f"attempt {step}", nested=True):
            params = {
                "iteration": step,
                "status": record.get("status"),
                "description": str(record.get("description") or "")[:250],
                "commit": record.get("commit"),
                "parent": record.get("parent"),
                "files": ",".join(record.get("files") or [])[:250],
            }
            for key, value in (record.get("params") or {}).items():
                params[f"param.{key}"[:250]] = value
            mlflow.log_params(params)
            numbers = {
                k: float(record[k])
                for k in (
                    "metric",
                    "delta",
                    "cost_usd",
                    "tokens_in",
                    "tokens_out",
                    "metric_runs",
                    "judge_cost_usd",
                )
                if isinstance(record.get(k), int | float)
            }
            if numbers:
                mlflow.log_metrics(numbers)
            if record.get("reason"):
                mlflow.set_tag("reason", str(record["reason"])[:500])
            text = attempt_diff(self.campaign.root, record) if record.get("commit") else ""
            if text and step > 0:
                mlflow.log_text(text, f"attempt-{step}.diff")

    def _stop(self, data: dict[str, Any]) -> None:
        self.mlflow.set_tag("autoresearch.stop_reason", data.get("stop_reason"))
        summary = data.get("summary") or {}
        if summary.get("best") is not None:
            self.mlflow.log_metric("final_best", float(summary["best"]))
        self.mlflow.end_run()


def make_tracker(campaign: Campaign, warn: Event) -> Event | None:
    if not campaign.config.tracking.mlflow:
        return None
    return MlflowTracker(campaign, warn)
