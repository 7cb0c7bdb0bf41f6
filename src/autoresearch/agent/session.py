"""`autoresearch session init | record | status`: a session log for agents that must run
their own measurements, compatible with the session module such agents use today.

The log is JSON lines (by default `autoresearch.jsonl`, the format pi-autoresearch writes,
so `autoresearch import pi` reads it too): a config record opens each segment
(`type: config`, the metric's name, its direction, the budgets), then one record per run
(`run`, `commit`, `metric`, `status`, `description`, `timestamp`, `segment`, ...).

Every record here is self-reported (`self_reported: true`): the number comes from the
agent, not from the engine. Nothing the engine decides reads this log; the engine's own
ledger never holds these records. The statistics (`status`) are facts about the agent's
numbers: the best kept value against the segment's first run, the median absolute
deviation (MAD) of the segment's values as the noise floor, confidence = |best - baseline|
/ MAD, budgets and convergence. Records that break the log's invariants (a run number out
of order, a metric that is not a finite number, an unknown status, a run before any
config) are refused, never written.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.errors import AutoresearchError

STATUSES = ("keep", "discard", "crash", "checks_failed")
DIRECTIONS = ("higher", "lower")
MEASURED = ("keep", "discard")
MIN_RUNS_FOR_CONFIDENCE = 3


class SessionError(AutoresearchError):
    """The session log or a record breaks an invariant (exit 1)."""


@dataclass
class Segment:
    index: int
    config: dict[str, Any]
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def direction(self) -> str:
        return str(self.config.get("bestDirection", "lower"))

    @property
    def metric_name(self) -> str:
        return str(self.config.get("metricName", "metric"))


@dataclass
class Session:
    path: Path
    segments: list[Segment]

    @property
    def runs(self) -> list[dict[str, Any]]:
        return [r for s in self.segments for r in s.runs]

    @property
    def budgets(self) -> dict[str, Any]:
        """The budgets of the session: those of its first config, unless a later one
        set them again."""
        out: dict[str, Any] = {}
        for segment in self.segments:
            for key in ("maxRuns", "maxRuntimeSeconds", "maxCost", "convergenceRuns"):
                if segment.config.get(key) is not None:
                    out[key] = segment.config[key]
        return out


def _finite(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def read(path: Path) -> Session:
    """The log, checked line by line; the first broken invariant is named."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SessionError(
            f"{path}: no session log; run `autoresearch session init --file {path}` first."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionError(f"{path}: cannot be read ({exc}).") from None
    segments: list[Segment] = []
    expected = 1
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise SessionError(f"{where} is not JSON; the log was edited or cut.") from None
        if not isinstance(entry, dict):
            raise SessionError(f"{where} is not a JSON object.")
        kind = entry.get("type")
        if kind == "config":
            if entry.get("bestDirection") not in DIRECTIONS:
                raise SessionError(f"{where}: a config record needs bestDirection higher|lower.")
            segments.append(Segment(len(segments), entry))
            continue
        if kind is not None:
            continue  # other entries (hooks, notes) carry no run
        if not segments:
            raise SessionError(f"{where}: a run before any config record.")
        if entry.get("run") != expected:
            raise SessionError(
                f"{where}: run {entry.get('run')!r} where run {expected} was due; runs are "
                "numbered one after another."
            )
        if entry.get("status") not in STATUSES:
            raise SessionError(f"{where}: status {entry.get('status')!r} is not one of {STATUSES}.")
        metric = entry.get("metric")
        if metric is not None and not _finite(metric):
            raise SessionError(f"{where}: metric {metric!r} is not a finite number.")
        if entry.get("segment", segments[-1].index) != segments[-1].index:
            raise SessionError(
                f"{where}: segment {entry.get('segment')!r}, but the last config opened "
                f"segment {segments[-1].index}."
            )
        segments[-1].runs.append(entry)
        expected += 1
    if not segments:
        raise SessionError(
            f"{path}: holds no config record; run `autoresearch session init --file {path}`."
        )
    return Session(path, segments)


def _append(path: Path, entries: list[dict[str, Any]]) -> None:
    """Append whole lines, flushed and fsynced: a reader never sees half a record."""
    data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _config(
    metric: str,
    direction: str,
    *,
    segment: int,
    name: str | None = None,
    unit: str = "",
    max_runs: int | None = None,
    max_runtime_seconds: float | None = None,
    max_cost: float | None = None,
    convergence_runs: int | None = None,
) -> dict[str, Any]:
    if direction not in DIRECTIONS:
        raise SessionError(f"direction {direction!r} must be higher or lower.")
    if not metric.strip():
        raise SessionError("the metric needs a name (--metric NAME).")
    for label, value in (
        ("--max-runs", max_runs),
        ("--max-runtime-seconds", max_runtime_seconds),
        ("--max-cost", max_cost),
        ("--convergence-runs", convergence_runs),
    ):
        if value is not None and (not _finite(value) or value <= 0):
            raise SessionError(f"{label} must be a positive number, not {value!r}.")
    entry: dict[str, Any] = {
        "type": "config",
        "name": name or metric,
        "metricName": metric,
        "metricUnit": unit,
        "bestDirection": direction,
        "segment": segment,
        "self_reported": True,
    }
    optional = {
        "maxRuns": max_runs,
        "maxRuntimeSeconds": max_runtime_seconds,
        "maxCost": max_cost,
        "convergenceRuns": convergence_runs,
    }
    entry.update({k: v for k, v in optional.items() if v is not None})
    return entry


def init(
    path: Path,
    metric: str,
    direction: str,
    *,
    force: bool = False,
    **budgets: Any,
) -> dict[str, Any]:
    """Start the log with its first config record; an existing log is refused (its
    history is evidence) unless `force` starts a new segment in it."""
    if path.exists() and path.stat().st_size and not force:
        raise SessionError(
            f"{path} already holds a session; record into it, or pass --force to open a "
            "new segment with this config."
        )
    segment = len(read(path).segments) if path.exists() and path.stat().st_size else 0
    entry = _config(metric, direction, segment=segment, **budgets)
    _append(path, [entry])
    return entry


def record(
    path: Path,
    status: str,
    metric: float | None,
    *,
    commit: str | None = None,
    description: str = "",
    elapsed_seconds: float | None = None,
    estimated_cost: float | None = None,
    metric_name: str | None = None,
    direction: str | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Append one run (and, when the metric or its direction changed, the config of a new
    segment first). Returns the session's status after it."""
    session = read(path)
    if status not in STATUSES:
        raise SessionError(f"--status {status!r} must be one of: {', '.join(STATUSES)}.")
    if metric is None and status in ("keep", "discard"):
        raise SessionError(f"a {status} needs the measured value (--metric NUMBER).")
    if metric is not None and not _finite(metric):
        raise SessionError(f"--metric {metric!r} is not a finite number.")
    for label, value in (
        ("--elapsed-seconds", elapsed_seconds),
        ("--estimated-cost", estimated_cost),
    ):
        if value is not None and (not _finite(value) or value < 0):
            raise SessionError(f"{label} must be a number >= 0, not {value!r}.")
    if (metric_name is None) != (direction is None):
        raise SessionError("a new segment needs both --metric-name and --direction.")
    entries: list[dict[str, Any]] = []
    current = session.segments[-1]
    segment = current.index
    if (
        metric_name is not None
        and direction is not None
        and (metric_name != current.metric_name or direction != current.direction)
    ):
        segment += 1
        entries.append(_config(metric_name, direction, segment=segment))
    run: dict[str, Any] = {
        "run": len(session.runs) + 1,
        "commit": commit,
        "metric": metric,
        "metrics": {},
        "status": status,
        "description": description,
        "timestamp": int(1000 * (time.time() if now is None else now)),
        "segment": segment,
        "self_reported": True,
    }
    if elapsed_seconds is not None:
        run["elapsedSeconds"] = elapsed_seconds
    if estimated_cost is not None:
        run["estimatedCost"] = estimated_cost
    probe = Session(path, [*session.segments])
    if entries:
        probe.segments.append(Segment(segment, entries[0]))
    else:
        probe.segments[-1] = Segment(current.index, current.config, list(current.runs))
    probe.segments[-1].runs.append(run)
    run["confidence"] = summary(probe)["confidence"]
    _append(path, [*entries, run])
    return summary(read(path))


def _better(a: float, b: float, direction: str) -> bool:
    return a > b if direction == "higher" else a < b


def summary(session: Session) -> dict[str, Any]:
    """Best, delta, MAD, confidence, counts, budgets and convergence of the current
    segment (budgets over the whole session)."""
    segment = session.segments[-1]
    runs = segment.runs
    # A crash's or failed check's number (often a placeholder 0) is not a measurement.
    measured = [r for r in runs if r.get("metric") is not None and r["status"] in MEASURED]
    values = [float(r["metric"]) for r in measured]
    baseline = float(measured[0]["metric"]) if measured else None
    best, best_run = None, None
    for r in runs:
        if r["status"] == "keep" and r.get("metric") is not None:
            value = float(r["metric"])
            if best is None or _better(value, best, segment.direction):
                best, best_run = value, r["run"]
    mad = None
    if len(values) >= MIN_RUNS_FOR_CONFIDENCE:
        middle = statistics.median(values)
        mad = statistics.median(abs(v - middle) for v in values)
    delta = None if best is None or baseline is None else best - baseline
    confidence = None
    if mad and delta is not None and len(values) >= MIN_RUNS_FOR_CONFIDENCE:
        confidence = abs(delta) / mad
    counts = {s: sum(1 for r in runs if r["status"] == s) for s in STATUSES}
    budgets = session.budgets
    everything = session.runs
    used = {
        "runs": len(everything),
        "runtime_seconds": sum(float(r.get("elapsedSeconds") or 0) for r in everything),
        "cost": sum(float(r.get("estimatedCost") or 0) for r in everything),
    }
    limits = {
        "runs": budgets.get("maxRuns"),
        "runtime_seconds": budgets.get("maxRuntimeSeconds"),
        "cost": budgets.get("maxCost"),
    }
    exhausted = [k for k, cap in limits.items() if cap is not None and used[k] >= cap]
    window = budgets.get("convergenceRuns")
    since = 0
    best_so_far: float | None = None
    for r in runs:
        raw = r.get("metric")
        improved = (
            r["status"] == "keep"
            and raw is not None
            and (best_so_far is None or _better(float(raw), best_so_far, segment.direction))
        )
        if improved and raw is not None:
            best_so_far, since = float(raw), 0
        else:
            since += 1
    converged = window is not None and since >= int(window)
    gain = None
    if delta is not None and baseline:
        sign = 1 if segment.direction == "higher" else -1
        gain = 100.0 * sign * delta / abs(baseline) + 0.0  # never -0.00
    return {
        "file": str(session.path),
        "self_reported": True,
        "segment": segment.index,
        "metric_name": segment.metric_name,
        "direction": segment.direction,
        "runs": len(runs),
        "total_runs": len(everything),
        "baseline": baseline,
        "best": best,
        "best_run": best_run,
        "delta": delta,
        "improvement_pct": gain,
        "mad": mad,
        "confidence": confidence,
        "counts": counts,
        "budgets": {
            "limits": limits,
            "used": used,
            "exhausted": exhausted,
        },
        "convergence": {
            "runs": window,
            "runs_since_improvement": since,
            "converged": converged,
        },
        "stop": bool(exhausted) or converged,
        "progress": _progress(segment, len(everything), best, baseline, gain, confidence, counts),
    }


def _progress(
    segment: Segment,
    total: int,
    best: float | None,
    baseline: float | None,
    gain: float | None,
    confidence: float | None,
    counts: dict[str, int],
) -> str:
    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.6g}"

    unit = str(segment.config.get("metricUnit") or "")
    parts = [f"run {total}", f"{segment.metric_name} best {num(best)}{unit}"]
    if gain is not None:
        parts[-1] += f" ({gain:+.2f}% vs baseline {num(baseline)}{unit})"
    parts.append("confidence " + ("-" if confidence is None else f"{confidence:.2f}x"))
    parts.append(" ".join(f"{counts[s]} {s}" for s in STATUSES))
    return " · ".join(parts)


def summary_lines(data: dict[str, Any]) -> list[str]:
    lines = [str(data["progress"]) + "  (self-reported)"]
    budgets = data["budgets"]
    limits, used = budgets["limits"], budgets["used"]
    shown = [f"{k} {used[k]:g}/{limits[k]:g}" for k in limits if limits[k] is not None]
    if shown:
        lines.append("budgets: " + ", ".join(shown))
    if budgets["exhausted"]:
        lines.append("budget exhausted: " + ", ".join(budgets["exhausted"]) + "; stop here")
    conv = data["convergence"]
    if conv["runs"]:
        state = "converged: stop here" if conv["converged"] else "not converged"
        lines.append(f"{conv['runs_since_improvement']} runs since the last new best ({state})")
    return lines
