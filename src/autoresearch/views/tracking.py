"""MLflow tracking: one run per campaign, one nested run per attempt.

The campaign run logs the metric and the best so far at every iteration; each attempt's
nested run holds its parameters (status, description, commit, files, proposer values),
its numbers (metric, cost, tokens) and its diff as an artifact. MLFLOW_TRACKING_URI is
honoured. A tracking failure is reported once and never stops the campaign.
"""

from __future__ import annotations

from collections.abc import Callable

from autoresearch.attempt import AttemptRecord
from autoresearch.config import Campaign
from autoresearch.errors import ConfigError
from autoresearch.events import Attempted, Event, Listener, Started, Stopped, Warned
from autoresearch.store.results import diff as attempt_diff


class MlflowTracker:
    def __init__(self, campaign: Campaign, warn: Listener) -> None:
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
            self.warn(Warned(f"MLflow tracking stopped: {exc}"))

    def __call__(self, event: Event) -> None:
        match event:
            case Started():
                self._guard(lambda: self._start(event))
            case Attempted():
                self._guard(lambda: self._attempt(event.record, event.best))
            case Stopped():
                self._guard(lambda: self._stop(event))
            case _:
                pass

    def _start(self, event: Started) -> None:
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
                    "max_iterations": event.max_iterations,
                }
            )

    def _attempt(self, record: AttemptRecord, best: float | None) -> None:
        mlflow = self.mlflow
        step = record.iteration
        if record.metric is not None:
            mlflow.log_metric("metric", record.metric, step=step)
        if best is not None:
            mlflow.log_metric("best", float(best), step=step)
        with mlflow.start_run(run_name=f"attempt {step}", nested=True):
            params = {
                "iteration": step,
                "status": str(record.status),
                "description": record.description[:250],
                "commit": record.commit,
                "parent": record.parent,
                "files": ",".join(record.files)[:250],
            }
            for key, value in (record.params or {}).items():
                params[f"param.{key}"[:250]] = value
            mlflow.log_params(params)
            numbers = {
                name: float(value)
                for name, value in (
                    ("metric", record.metric),
                    ("delta", record.delta),
                    ("cost_usd", record.cost.usd),
                    ("tokens_in", record.cost.tokens_in),
                    ("tokens_out", record.cost.tokens_out),
                    ("metric_runs", record.metric_runs),
                    ("judge_cost_usd", record.judge_cost.usd),
                )
                if value is not None
            }
            if numbers:
                mlflow.log_metrics(numbers)
            if record.reason:
                mlflow.set_tag("reason", record.reason[:500])
            text = attempt_diff(self.campaign.root, record) if record.commit else ""
            if text and step > 0:
                mlflow.log_text(text, f"attempt-{step}.diff")

    def _stop(self, event: Stopped) -> None:
        self.mlflow.set_tag("autoresearch.stop_reason", event.stop_reason)
        if event.summary.get("best") is not None:
            self.mlflow.log_metric("final_best", float(event.summary["best"]))
        self.mlflow.end_run()


def make_tracker(campaign: Campaign, warn: Listener) -> Listener | None:
    if not campaign.config.tracking.mlflow:
        return None
    return MlflowTracker(campaign, warn)
