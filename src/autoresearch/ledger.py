"""The append-only attempt ledger (`ledger.jsonl`), `results.tsv`, and the campaign state file."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.decide import confidence_better, pooled_noise

TSV_HEADER = "iteration\tcommit\tmetric\tdelta\tstatus\tdescription\n"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str, durable: bool = True) -> None:
    """Replace `path` in one step; with `durable`, the content is on disk first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def line_hash(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.10g}"


class Ledger:
    """One JSON object per line; every append is flushed and fsynced before returning."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.path = state_dir / "ledger.jsonl"
        self.tsv_path = state_dir / "results.tsv"
        self.torn_path = state_dir / "ledger.torn"

    def records(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for line in self._lines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                break
            if isinstance(record, dict):
                out.append(record)
        return out

    def _lines(self) -> list[str]:
        try:
            data = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        return [line for line in data.split("\n") if line.strip()]

    def repair(self) -> str | None:
        """Move a torn last line (a write cut short by a crash) aside; say what was done."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if not data:
            return None
        body, _, last = data.rstrip(b"\n").rpartition(b"\n")
        complete = data.endswith(b"\n")
        try:
            json.loads(last)
            if complete:
                return None
            with open(self.path, "ab") as handle:
                handle.write(b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
        with open(self.torn_path, "ab") as handle:
            handle.write(last + b"\n")
        keep = body + b"\n" if body else b""
        write_atomic(self.path, keep.decode("utf-8", errors="surrogateescape"))
        return f"a torn last line of {self.path.name} was moved to {self.torn_path.name}"

    def last_hash(self) -> str | None:
        lines = self._lines()
        return line_hash(lines[-1]) if lines else None

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        self.dir.mkdir(parents=True, exist_ok=True)
        record = {**record, "prev_hash": self.last_hash()}
        line = json.dumps(record, ensure_ascii=False, sort_keys=False, allow_nan=False)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._append_tsv(record)
        return record

    def _append_tsv(self, record: dict[str, Any]) -> None:
        new = not self.tsv_path.exists()
        description = str(record.get("description") or "").replace("\t", " ").replace("\n", " ")
        row = "\t".join(
            [
                str(record.get("iteration")),
                (record.get("commit") or "")[:12],
                _fmt(record.get("metric")),
                _fmt(record.get("delta")),
                str(record.get("status")),
                description,
            ]
        )
        # results.tsv is derived from the ledger (which is fsynced): flushing suffices.
        with open(self.tsv_path, "a", encoding="utf-8") as handle:
            if new:
                handle.write(TSV_HEADER)
            handle.write(row + "\n")
        if new:
            _fsync_dir(self.dir)


def reached(value: float, target: float | None, direction: str) -> bool:
    if target is None:
        return False
    return value <= target if direction == "minimize" else value >= target


@dataclass
class Summary:
    name: str
    direction: str
    baseline: float | None = None
    baseline_commit: str | None = None
    best: float | None = None
    best_iteration: int | None = None
    best_commit: str | None = None
    iterations: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    streak: int = 0  # attempts in a row not kept, from the end
    cost_usd: float = 0.0  # proposer and judge, as recorded
    tokens_in: int = 0
    tokens_out: int = 0
    noise: float | None = None  # pooled standard deviation of repeated samples
    confidence: float | None = None  # P(best is truly better than the baseline)

    def to_json(self) -> dict[str, Any]:
        delta = None
        if self.best is not None and self.baseline is not None:
            delta = self.best - self.baseline
        return {
            "name": self.name,
            "direction": self.direction,
            "baseline": self.baseline,
            "best": self.best,
            "best_iteration": self.best_iteration,
            "best_commit": self.best_commit,
            "delta": delta,
            "improvement_pct": _pct(self.baseline, self.best, self.direction),
            "iterations": self.iterations,
            "counts": self.counts,
            "cost_usd": round(self.cost_usd, 6),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "noise": self.noise,
            "noise_pct": None
            if self.noise is None or not self.baseline
            else 100.0 * self.noise / abs(self.baseline),
            "confidence": self.confidence,
        }


def _pct(baseline: float | None, best: float | None, direction: str) -> float | None:
    if baseline is None or best is None or baseline == 0:
        return None
    gain = (baseline - best) if direction == "minimize" else (best - baseline)
    return 100.0 * gain / abs(baseline)


def summarize(name: str, direction: str, records: list[dict[str, Any]]) -> Summary:
    summary = Summary(name=name, direction=direction)
    counts: Counter[str] = Counter()
    for record in records:
        status = str(record.get("status"))
        counts[status] += 1
        summary.cost_usd += float(record.get("cost_usd") or 0) + float(
            record.get("judge_cost_usd") or 0
        )
        summary.tokens_in += int(record.get("tokens_in") or 0) + int(
            record.get("judge_tokens_in") or 0
        )
        summary.tokens_out += int(record.get("tokens_out") or 0) + int(
            record.get("judge_tokens_out") or 0
        )
        iteration = int(record.get("iteration", 0))
        summary.iterations = max(summary.iterations, iteration)
        if status == "baseline":
            summary.baseline = record.get("metric")
            summary.baseline_commit = record.get("commit")
            summary.best = summary.baseline
            summary.best_iteration = 0
            summary.best_commit = summary.baseline_commit
            summary.streak = 0
        elif status == "keep":
            summary.best = record.get("metric")
            summary.best_iteration = iteration
            summary.best_commit = record.get("commit")
            summary.streak = 0
        elif status != "interrupted":
            summary.streak += 1
    summary.counts = dict(counts)
    groups = sample_groups(records)
    noise = pooled_noise(list(groups.values()))
    if noise is not None:
        summary.noise = noise.sigma
        base = groups.get(summary.baseline_commit or "", [])
        best = groups.get(summary.best_commit or "", [])
        if summary.best_iteration and base and best:
            summary.confidence = confidence_better(base, best, direction, noise)
    return summary


def sample_groups(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Every sample of each version of the code: its own runs plus later re-measurements."""
    groups: dict[str, list[float]] = {}
    for record in records:
        commit = record.get("commit")
        if commit and record.get("samples"):
            groups.setdefault(commit, []).extend(float(s) for s in record["samples"])
        parent = record.get("parent")
        if parent and record.get("incumbent_samples"):
            groups.setdefault(parent, []).extend(float(s) for s in record["incumbent_samples"])
    return groups


class StateFile:
    """`state.json`: what the engine is doing now, readable while it runs."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "state.json"

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def update(self, durable: bool = True, **fields: Any) -> dict[str, Any]:
        """Merge `fields` in. Progress updates pass durable=False: losing one to a power
        cut costs nothing, and they come several times per attempt."""
        data = self.read()
        data.update(fields)
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", durable)
        return data
