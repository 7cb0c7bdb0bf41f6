"""The campaign loop: baseline, then propose -> check -> commit -> measure -> guard -> decide.

The engine knows no terminal; it reports progress through `on_event`.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from filelock import FileLock, Timeout

from autoresearch.config import Campaign
from autoresearch.decide import Verdict
from autoresearch.errors import AutoresearchError, CampaignLocked, ConfigError, GitError
from autoresearch.evaluation import Evaluation, Evaluator
from autoresearch.executors import Executor, LocalExecutor
from autoresearch.harness import ChildRecord, network_isolation_problem
from autoresearch.integrity import Fingerprint, harness_files
from autoresearch.ledger import Ledger, StateFile
from autoresearch.prompt import proposal_context
from autoresearch.proposers import create_proposer, validate_proposer
from autoresearch.proposers.base import Outcome, Proposal, Proposer
from autoresearch.scope import PathMatcher
from autoresearch.summary import reached, summarize
from autoresearch.workspace import (
    Candidate,
    Workspace,
    checkout_changes,
    checkout_state,
    ensure_state_dir,
    head_of,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_TAMPERED = 3
EXIT_INTERRUPTED = 130
PROPOSER_FAILURE_LIMIT = 3
# Outcomes after which only the attempt's own paths need undoing (see _roll_back).
FAST_ROLLBACK = ("keep", "discard", "crash", "guard_failed", "no_change")

Event = Callable[[str, dict[str, Any]], None]


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM: roll back the attempt in flight and stop."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class RunResult:
    stop_reason: str
    exit_code: int
    summary: dict[str, Any]
    message: str = ""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def lock_campaign(campaign: Campaign) -> FileLock:
    state = StateFile(campaign.state_dir)
    lock = FileLock(str(campaign.state_dir / "engine.lock"), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        pid = state.read().get("pid")
        who = f"process {pid}" if pid else "another process"
        raise CampaignLocked(
            f"campaign '{campaign.name}' is already running ({who}); wait for it to finish "
            "or stop it first."
        ) from None
    return lock


class Engine:
    def __init__(
        self,
        campaign: Campaign,
        *,
        proposer: Proposer | None = None,
        executor: Executor | None = None,
        on_event: Event | None = None,
        max_iterations: int | None = None,
    ) -> None:
        self.campaign = campaign
        self.cfg = campaign.config
        self.proposer = proposer
        self.executor: Executor = executor or LocalExecutor()
        self.on_event = on_event or (lambda kind, data: None)
        self.max_iterations = (
            self.cfg.stop.max_iterations if max_iterations is None else max_iterations
        )
        self.ledger = Ledger(campaign.state_dir)
        self.state = StateFile(campaign.state_dir)
        self.logs = campaign.state_dir / "logs"
        self.workspace = Workspace(
            campaign.root, campaign.name, campaign.state_dir, list(self.cfg.share)
        )
        self.scope = PathMatcher(self.cfg.scope)
        self.harness = PathMatcher(self.cfg.harness)
        self.records: list[dict[str, Any]] = []
        self.incumbent = ""
        self.incumbent_tree = ""
        self.best_value: float | None = None
        self.fingerprint = Fingerprint()
        self.harness_paths: list[str] = []
        self.started = time.monotonic()
        self.proposer_failures = 0
        self._candidate: Candidate | None = None

    # -- events and state ---------------------------------------------------------------

    def emit(self, kind: str, **data: Any) -> None:
        self.on_event(kind, data)

    def phase(self, phase: str, iteration: int | None = None, **extra: Any) -> None:
        self.state.update(
            durable=False, phase=phase, iteration=iteration, updated_utc=utc_now(), **extra
        )
        self.emit("phase", phase=phase, iteration=iteration, **extra)

    @property
    def best(self) -> float | None:
        return self.best_value

    def summary(self) -> dict[str, Any]:
        return summarize(self.cfg.name, self.cfg.metric.direction, self.records).to_json()

    # -- run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        ensure_state_dir(self.campaign.root)
        self.campaign.state_dir.mkdir(parents=True, exist_ok=True)
        lock = lock_campaign(self.campaign)
        ChildRecord.use(self.campaign.state_dir / "child.pgid")
        leftover = ChildRecord.kill_leftover()
        if leftover:
            self.emit(
                "warning",
                message=f"killed process group {leftover} left by an engine "
                "that was stopped abruptly",
            )
        previous: dict[int, Any] = {}
        try:
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, _raise_interrupted)
        except ValueError:  # not the main thread: signals stay with the caller
            pass
        try:
            return self._run()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if self.proposer is not None:
                self.proposer.close()
            self.state.update(running=False, phase="stopped", updated_utc=utc_now())
            ChildRecord.use(None)
            lock.release()

    def _run(self) -> RunResult:
        self.state.update(
            name=self.cfg.name,
            direction=self.cfg.metric.direction,
            target=self.cfg.metric.target,
            config=str(self.campaign.config_path),
            pid=os.getpid(),
            running=True,
            stop_reason=None,
            started_utc=utc_now(),
            max_iterations=self.max_iterations,
        )
        if not self.cfg.sandbox.network:
            problem = network_isolation_problem()
            if problem:
                raise ConfigError(
                    f"{self.campaign.display_path()}: key 'sandbox.network': false needs network "
                    f"namespaces, which this system refuses ({problem}); set it to true or run "
                    "where `unshare --net` works."
                )
        repaired = self.ledger.repair()
        if repaired:
            self.emit("warning", message=repaired)
        self.records = self.ledger.records()
        if self.proposer is None:
            self.proposer = create_proposer(self.campaign)
        start = self._start_commit()
        dirty = [k for k in checkout_state(self.campaign.root) if k not in ("(branch)", "(HEAD)")]
        if dirty:
            self.emit(
                "warning",
                message=f"your checkout has uncommitted changes ({', '.join(dirty[:3])}"
                + (", ..." if len(dirty) > 3 else "")
                + "); they are not part of the campaign, which starts from HEAD",
            )
        self.workspace.ensure(start)
        validate_proposer(self.proposer, self.workspace.path)
        self.harness_paths = harness_files(self.campaign, self.workspace.path)
        self.fingerprint = Fingerprint.take(self.campaign, self.workspace.path, self.harness_paths)
        self._check_same_judge()
        self.incumbent = start
        self.incumbent_tree = self.workspace.tree_of(start)
        self.evaluator = Evaluator(
            self.campaign,
            self.workspace,
            self.executor,
            self.fingerprint,
            self.logs,
            self.phase,
        )
        self.evaluator.load(self.records, start)
        self._account_for_interrupted()
        self.emit(
            "start",
            summary=self.summary(),
            max_iterations=self.max_iterations,
            workspace=str(self.workspace.path),
            resumed=bool(self.records),
        )
        try:
            if not self.records:
                failure = self._baseline()
                if failure:
                    return self._finish("baseline_failed", EXIT_FAILED, failure)
            else:
                self._restore_best()
            while True:
                stop = self._stop_reason()
                if stop:
                    return self._finish(stop, EXIT_OK)
                iteration = self._last_iteration() + 1
                record = self._attempt(iteration)
                if record["status"] in ("tampered", "checkout_changed"):
                    return self._finish(
                        record["status"], EXIT_TAMPERED, f"campaign halted: {record['reason']}"
                    )
                if self.proposer_failures >= PROPOSER_FAILURE_LIMIT:
                    return self._finish(
                        "proposer_failed",
                        EXIT_FAILED,
                        f"the proposer failed {self.proposer_failures} times in a row; last: "
                        f"{record.get('reason')}",
                    )
        except Interrupted as exc:
            code = EXIT_INTERRUPTED if exc.signum == signal.SIGINT else 128 + exc.signum
            return self._finish("interrupted", code)

    def _finish(self, reason: str, code: int, message: str = "") -> RunResult:
        self.state.update(stop_reason=reason, stop_message=message, stopped_utc=utc_now())
        result = RunResult(reason, code, self.summary(), message)
        self.emit(
            "stop",
            stop_reason=reason,
            summary=result.summary,
            message=message,
            branch=self.workspace.branch,
            ledger=str(self.ledger.path),
        )
        return result

    # -- start and resume ---------------------------------------------------------------

    def _start_commit(self) -> str:
        root = self.campaign.root
        head = head_of(root)
        current = self.workspace.repo.run("symbolic-ref", "-q", "HEAD", check=False).strip()
        if current == self.workspace.branch_ref:
            raise GitError(
                f"your checkout is on the campaign branch {self.workspace.branch}; switch to "
                "another branch first, the engine moves this one."
            )
        summary = summarize(self.cfg.name, self.cfg.metric.direction, self.records)
        if not self.records:
            if self.workspace.branch_commit() not in (None, head):
                raise ConfigError(
                    f"branch {self.workspace.branch} already exists but "
                    f"{self.ledger.path.relative_to(root)} does not; delete the branch "
                    f"(git worktree prune && git branch -D {self.workspace.branch}) or choose "
                    "another name."
                )
            return head
        best = summary.best_commit
        if not best or self.workspace.repo.rev(best) is None:
            raise GitError(
                f"the best commit {best} recorded in {self.ledger.path.name} is missing from "
                "the repository; the campaign cannot resume."
            )
        return best

    def _check_same_judge(self) -> None:
        settings = self.fingerprint.to_json()
        stored = self.state.read().get("fingerprint")
        if self.records and stored and stored != settings:
            changed = sorted(
                p
                for p in set(stored.get("files", {})) | set(settings["files"])  # type: ignore[arg-type]
                if stored.get("files", {}).get(p) != settings["files"].get(p)  # type: ignore[union-attr]
            ) or ["the metric, guard or decision settings"]
            raise ConfigError(
                f"the judge changed since campaign '{self.cfg.name}' started "
                f"({', '.join(changed)}); numbers would not be comparable. Restore it, or "
                "start a new campaign under another name."
            )
        self.state.update(fingerprint=settings)

    def _account_for_interrupted(self) -> None:
        """An attempt that was in flight when the engine died is logged, never lost."""
        state = self.state.read()
        in_flight = state.get("in_flight")
        if in_flight is not None and int(in_flight) > self._last_iteration() and self.records:
            self._log(
                {
                    "iteration": int(in_flight),
                    "status": "interrupted",
                    "metric": None,
                    "commit": None,
                    "parent": self.incumbent,
                    "files": [],
                    "description": "",
                    "reason": "the engine stopped while this attempt was in flight",
                }
            )
        self.state.update(in_flight=None)

    def _restore_best(self) -> None:
        for record in reversed(self.records):
            if record.get("status") in ("keep", "baseline"):
                self.best_value = record.get("metric")
                return

    def _last_iteration(self) -> int:
        return max((int(r.get("iteration", 0)) for r in self.records), default=0)

    def _stop_reason(self) -> str | None:
        best = self.best
        if best is not None and reached(best, self.cfg.metric.target, self.cfg.metric.direction):
            return "target"
        summary = summarize(self.cfg.name, self.cfg.metric.direction, self.records)
        if self._last_iteration() >= self.max_iterations:
            return "max_iterations"
        if self.cfg.stop.plateau and summary.streak >= self.cfg.stop.plateau:
            return "plateau"
        elapsed = (time.monotonic() - self.started) / 60.0
        if self.cfg.stop.max_minutes and elapsed >= self.cfg.stop.max_minutes:
            return "max_minutes"
        budget = self.cfg.stop.max_cost_usd
        if budget is not None and summary.cost_usd >= budget:
            return "max_cost"
        return None

    # -- measuring ----------------------------------------------------------------------

    def _baseline(self) -> str | None:
        began = time.monotonic()
        self.logs.mkdir(parents=True, exist_ok=True)
        measured = self.evaluator.baseline(self.incumbent)
        if measured.failure:
            return (
                f"the baseline measurement failed: {measured.reason}; see "
                f"{self.logs.relative_to(self.campaign.root)}/ and fix the metric command "
                "(try `autoresearch check`)."
            )
        guard = self.evaluator.run_guard(0)
        if guard.failure:
            return (
                f"the guard fails on the unchanged code ({guard.reason}); fix the code or the "
                "guard command first."
            )
        self.best_value = measured.metric
        self.workspace.record_ref(0, self.incumbent)
        self._log(
            {
                "iteration": 0,
                "status": "baseline",
                "metric": measured.metric,
                "samples": measured.samples,
                "metric_runs": measured.runs,
                "commit": self.incumbent,
                "parent": None,
                "files": [],
                "description": "baseline",
                "propose_seconds": 0.0,
                "measure_seconds": round(measured.seconds, 4),
                "guard_seconds": round(guard.seconds, 4),
                **_judge_fields(measured),
                "engine_seconds": round(
                    time.monotonic() - began - measured.seconds - guard.seconds, 4
                ),
            }
        )
        return None

    # -- one attempt --------------------------------------------------------------------

    def _attempt(self, iteration: int) -> dict[str, Any]:
        began = time.monotonic()
        record: dict[str, Any] = {
            "iteration": iteration,
            "status": "interrupted",
            "metric": None,
            "commit": None,
            "parent": self.incumbent,
            "files": [],
            "description": "",
        }
        timings = {"propose": 0.0, "measure": 0.0, "guard": 0.0}
        self.logs.mkdir(parents=True, exist_ok=True)
        self.state.update(in_flight=iteration)
        try:
            self._attempt_steps(iteration, record, timings)
        except Interrupted:
            record["status"] = "interrupted"
            record.setdefault("reason", "stopped by a signal during the attempt")
            self._close_attempt(record, timings, began)
            raise
        self._close_attempt(record, timings, began)
        return record

    def _close_attempt(
        self, record: dict[str, Any], timings: dict[str, float], began: float
    ) -> None:
        self._roll_back(record["status"])
        if record["status"] == "keep":
            self.proposer_failures = 0
        best = self.best
        metric = record.get("metric")
        record["delta"] = None if metric is None or best is None else metric - best
        if record["status"] == "keep" and record.get("previous_best") is not None:
            record["delta"] = metric - record["previous_best"]
        record["best"] = best
        record["propose_seconds"] = round(timings["propose"], 4)
        record["measure_seconds"] = round(timings["measure"], 4)
        record["guard_seconds"] = round(timings["guard"], 4)
        total = time.monotonic() - began
        record["engine_seconds"] = round(total - sum(timings.values()), 4)
        record["total_seconds"] = round(total, 4)
        self._log(record)
        self.state.update(in_flight=None)
        if self.proposer is not None and record["status"] != "interrupted":
            self.proposer.observe(
                Outcome(
                    iteration=record["iteration"],
                    status=record["status"],
                    metric=metric,
                    best=best,
                    direction=self.cfg.metric.direction,
                )
            )

    def _attempt_steps(
        self, iteration: int, record: dict[str, Any], timings: dict[str, float]
    ) -> None:
        assert self.proposer is not None
        self.phase("proposing", iteration)
        ctx = proposal_context(
            self.campaign, self.records, iteration, self.best, self.workspace.path, self.logs
        )
        watch = self.cfg.sandbox.watch_checkout and getattr(self.proposer, "runs_commands", True)
        shares = list(self.cfg.share)
        before = checkout_state(self.campaign.root, shares) if watch else None
        t0 = time.monotonic()
        try:
            proposal = self.proposer.propose(ctx)
        except AutoresearchError as exc:
            proposal = Proposal(failed=True, reason=str(exc))
        except Exception as exc:  # a proposer's bug costs one attempt, not the campaign
            trace = self.logs / f"{iteration:04d}-proposer-error.txt"
            trace.write_text(traceback.format_exc(), encoding="utf-8")
            proposal = Proposal(
                failed=True, reason=f"{type(exc).__name__}: {exc} (see {trace.name})"
            )
        timings["propose"] = time.monotonic() - t0
        self._apply_proposal_fields(record, proposal)

        self.phase("checking", iteration)
        # The two scans (the user's checkout, the workspace) are independent git processes.
        with ThreadPoolExecutor(max_workers=1) as pool:
            after = pool.submit(checkout_state, self.campaign.root, shares) if before else None
            candidate = self.workspace.collect(self.incumbent, self.incumbent_tree)
            self._candidate = candidate
            changed = checkout_changes(before, after.result()) if before and after else []
        if changed:
            record["status"] = "checkout_changed"
            record["reason"] = "your checkout changed while the proposer ran: " + ", ".join(
                changed[:5]
            )
            return
        record["files"] = candidate.paths
        if candidate.head_moved:
            record["note"] = "the proposer moved HEAD; its work was judged as plain changes"
        if not record["description"]:
            record["description"] = _describe(candidate)
        if candidate.changes:
            message = f"autoresearch {self.cfg.name} #{iteration}: {record['description']}"
            record["commit"] = self.workspace.commit(candidate, self.incumbent, message, iteration)
            record["diffstat"] = self.workspace.diffstat(self.incumbent, record["commit"])

        if proposal.timed_out or proposal.failed:
            record["status"] = "timeout" if proposal.timed_out else "proposer_failed"
            record["reason"] = proposal.reason
            self.proposer_failures += 1
            return
        self.proposer_failures = 0
        if proposal.refused:
            record["status"] = "edit_refused"
            record["reason"] = proposal.reason
            return
        if not candidate.changes:
            record["status"] = "no_change"
            return
        touched = [
            p for p in candidate.paths if p in self.fingerprint.files or self.harness.matches(p)
        ]
        if touched:
            record["status"] = "tampered"
            record["reason"] = f"the proposer changed the harness file {touched[0]}"
            return
        outside = [
            c.path
            for c in candidate.changes
            if not self.scope.matches(c.path)
            or (c.status != "D" and self.workspace.escapes(c.path))
        ]
        if outside:
            record["status"] = "scope_violation"
            record["reason"] = "changed outside the scope: " + ", ".join(outside[:5])
            return
        self.workspace.drop_paths(candidate.ignored)

        measured = self.evaluator.evaluate(iteration, candidate, record["commit"])
        timings["measure"] = measured.seconds
        record["samples"] = measured.samples
        if measured.incumbent_samples:
            record["incumbent_samples"] = measured.incumbent_samples
        record["metric_runs"] = measured.runs
        record["metric"] = measured.metric
        _add_judge_costs(record, measured)
        if measured.failure:
            record["status"] = measured.failure
            record["reason"] = measured.reason
            return
        if measured.verdict is not Verdict.KEEP:
            record["status"] = "discard"
            return
        # The guard only matters for a change that would be kept.
        guard = self.evaluator.run_guard(iteration)
        timings["guard"] = guard.seconds
        if guard.failure:
            record["status"] = "tampered" if guard.failure == "tampered" else "guard_failed"
            record["reason"] = guard.reason
            return
        self.workspace.advance(record["commit"], self.incumbent)
        record["status"] = "keep"
        record["previous_best"] = self.best_value
        self.incumbent = record["commit"]
        self.incumbent_tree = candidate.tree
        self.best_value = measured.metric
        self.evaluator.promote(record["commit"])

    def _roll_back(self, status: str) -> None:
        """Leave the worktree exactly at the incumbent for the next attempt.

        The common outcomes undo only the paths the attempt touched; anything unusual
        (a signal, a tamper, a proposer that failed midway) gets a full reset.
        """
        candidate, self._candidate = self._candidate, None
        if status in FAST_ROLLBACK and candidate is not None:
            try:
                if status != "keep":
                    self.workspace.drop_candidate(candidate, self.incumbent)
                self.workspace.drop_paths(candidate.ignored)
                self.workspace.link_shares()
                return
            except GitError as exc:
                self.emit("warning", message=f"falling back to a full reset: {exc}")
        self.workspace.reset_to(self.incumbent)
        self.workspace.link_shares()

    def _apply_proposal_fields(self, record: dict[str, Any], proposal: Proposal) -> None:
        record["description"] = proposal.description
        for key in ("cost_usd", "tokens_in", "tokens_out"):
            value = getattr(proposal, key)
            if value is not None:
                record[key] = value
        if proposal.output_path:
            record["proposer_output"] = proposal.output_path
        if proposal.params:
            record["params"] = proposal.params

    def _log(self, record: dict[str, Any]) -> None:
        record = {"iteration": record["iteration"], "status": record["status"], **record}
        record["utc"] = utc_now()
        stored = self.ledger.append(record)
        self.records.append(stored)
        self.emit("attempt", record=stored, best=self.best, max_iterations=self.max_iterations)


def _judge_fields(measured: Evaluation) -> dict[str, Any]:
    if not (measured.cost_usd or measured.tokens_in or measured.tokens_out):
        return {}
    return {
        "judge_cost_usd": round(measured.cost_usd, 8),
        "judge_tokens_in": measured.tokens_in,
        "judge_tokens_out": measured.tokens_out,
    }


def _add_judge_costs(record: dict[str, Any], measured: Evaluation) -> None:
    record.update(_judge_fields(measured))


def _describe(candidate: Candidate) -> str:
    names = ", ".join(candidate.paths[:3])
    more = f" and {len(candidate.paths) - 3} more" if len(candidate.paths) > 3 else ""
    return f"edit {names}{more}" if names else "no change"


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)
