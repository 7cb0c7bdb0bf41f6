"""Measuring code: the baseline, a candidate against the incumbent, and the guard.

The decision rule's `Comparison` says which side to measure next; under `sequential` the
incumbent is re-measured between candidate samples (candidate, incumbent, candidate, ...),
so drift of the machine affects both sides alike. Every run is verified against the harness
fingerprint first, and whatever a run leaves in the worktree is undone after it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.config import Campaign
from autoresearch.errors import AutoresearchError
from autoresearch.executors import CommandSpec, Executor, Measurement, metric_spec
from autoresearch.isolation import machine
from autoresearch.isolation.owned import open_own, real_parents
from autoresearch.isolation.process import Limits
from autoresearch.measure.integrity import Fingerprint
from autoresearch.measure.judge import Judge
from autoresearch.measure.metrics import Readings, Samples, samples_from
from autoresearch.measure.readout import MetricParseError
from autoresearch.measure.tree import MeasureTree, Tree
from autoresearch.stats import robust
from autoresearch.stats.auto_rule import describe
from autoresearch.stats.decide import (
    WANTED_GAIN_PCT,
    Look,
    Rule,
    Side,
    Verdict,
    detectable_gain,
    estimate,
    explain,
)
from autoresearch.stats.sample_book import SampleBook, carry_note, states_text
from autoresearch.workspace import Candidate, Workspace

Phase = Callable[..., None]


@dataclass(frozen=True)
class Swap:
    """Files put in the measurement folder for one run: by the folder's path, the file
    whose bytes go there, and those bytes' SHA-256 (what the harness check expects of a
    harness file the swap replaces)."""

    files: Mapping[str, Path]
    digests: Mapping[str, str]


@dataclass
class Evaluation:
    samples: list[float] = field(default_factory=list)
    incumbent_samples: list[float] = field(default_factory=list)
    verdict: Verdict = Verdict.DISCARD
    failure: Status | None = None  # crash, timeout or tampered
    reason: str = ""  # why it failed, or why the rule decided as it did
    seconds: float = 0.0
    runs: int = 0
    cost_usd: float = 0.0  # what an LLM judge cost
    tokens_in: int = 0
    tokens_out: int = 0
    # [[metrics]] and a composite's named values, per run, of either side
    secondary: Samples = field(default_factory=dict)
    incumbent_secondary: Samples = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)  # the last run's, until filed
    # The look the rule decided at (None: the comparison was cut short, or a baseline):
    # the candidate's judged level, which the recorded best and delta follow.
    look: Look | None = None
    # The comparison's runs in the order taken (`Comparison.taken`): not recorded, the
    # ledger's replay gives them again.
    taken: list[tuple[Side, float, bool]] = field(default_factory=list)

    @property
    def metric(self) -> float | None:
        return estimate(self.samples) if self.samples else None


GUARD_LINES = 5  # of a failed guard's output, in the attempt's reason
TAIL_BYTES = 16384


def passed_values(pass_env: Iterable[str]) -> tuple[str, ...]:
    """The values of the `[sandbox] pass_env` names: the metric and guard see them, the
    proposer never does, so no text that reaches it may carry them."""
    values = (os.environ.get(name, "") for name in pass_env)
    return tuple(sorted({v for v in values if len(v) >= 4}, key=len, reverse=True))


def redact(text: str, hide: Iterable[str]) -> str:
    for value in hide:
        text = text.replace(value, "[a pass_env value]")
    return text


def log_tail(
    paths: Iterable[Path], tail_bytes: int = TAIL_BYTES, hide: Iterable[str] = ()
) -> list[str]:
    """The non-empty lines at the end of each log, in turn (right-stripped), without the
    values in `hide`. Bounded: only the last `tail_bytes` of each are read; a log that
    cannot be read is skipped."""
    hide = tuple(hide)
    lines: list[str] = []
    for path in paths:
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - tail_bytes))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        lines += [redact(line.rstrip(), hide) for line in text.splitlines() if line.strip()]
    return lines


def last_lines(*paths: Path, hide: Iterable[str] = ()) -> str:
    """What a failed guard says failed (stdout first, then stderr): pytest's short test
    summary lines, else the last meaningful lines; never separator rows, nor the values in
    `hide`."""
    shown = failure_lines(log_tail(paths, hide=hide))
    return ("; last lines: " + " | ".join(shown)) if shown else ""


LINE_CHARS = 300
# A row drawn with one character repeated, with or without a title: `====`, `!!!! x !!!!`.
_RULE = re.compile(r"^([=\-!_*#~+.<>])\1{3,}\s*(.*?)\s*(?:\1{3,})?$")
# Rows that only announce what follows.
_HEADINGS = {"short test summary info", "FAILURES", "ERRORS", "warnings summary"}
_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")


def failure_lines(lines: list[str], count: int = GUARD_LINES) -> list[str]:
    """The lines of a failed command's output worth a person's reading: pytest's `FAILED
    path::test - message` lines (the message taken whole from the failure's `E` line when
    pytest cut it to the terminal's width) and its tally, or else the last lines that are
    not separator rows."""
    kept: list[str] = []
    for line in (text.strip() for text in lines):
        rule = _RULE.match(line)
        if rule is not None:
            line = rule.group(2).strip()
            # A test's section header (`____ test_y ____`) and pytest's own headings
            # announce what follows; a titled row's title (the tally) is kept.
            if not line or rule.group(1) == "_" or line in _HEADINGS:
                continue
            if line.startswith("test session starts"):
                continue
        kept.append(line)
    failed = [line for line in kept if _SUMMARY.match(line)]
    if not failed:
        return [line[:LINE_CHARS] for line in kept[-count:]]
    tally = [line for line in kept if re.search(r"\b\d+ (failed|errors?)\b", line)]
    shown = [_whole(line, lines) for line in failed[:count]]
    if len(failed) > count:
        shown.append(f"... and {len(failed) - count} more failed")
    return [line[:LINE_CHARS] for line in shown + tally[-1:]]


def _whole(summary: str, lines: list[str]) -> str:
    """A pytest summary line whose message was cut ("- AssertionError: asse...") with the
    message taken from the first `E` line of that test's section, when it is in the tail."""
    match = _SUMMARY.match(summary)
    if match is None or not (match.group(3) or "").endswith("..."):
        return summary
    test = match.group(2).rsplit("::", 1)[-1]
    inside = False
    for line in lines:
        text = line.strip()
        if text.startswith("_") and text.strip("_ ") in (test, match.group(2)):
            inside = True
        elif inside and text.startswith("E "):
            return f"{match.group(1)} {match.group(2)} - {text[1:].strip()}"
    return summary


SECRET_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)


def measurement_env(pass_env: list[str]) -> dict[str, str]:
    """The engine's environment minus secrets (`*_KEY`, `*_TOKEN`, ...), unless passed."""
    allowed = set(pass_env)
    return {k: v for k, v in os.environ.items() if k in allowed or not SECRET_RE.search(k)}


class Evaluator:
    """Runs what a `Comparison` asks for, through the executor, until it gives a verdict.

    It keeps the samples of every version of the code measured so far (for the pooled
    noise and the incumbent's reference), and which of a kept commit's samples selected
    it. The engine says which commit is the incumbent: it passes it to `evaluate`, and
    `baseline` and `kept` mark a commit as selected.
    """

    def __init__(
        self,
        campaign: Campaign,
        workspace: Workspace,
        executor: Executor,
        fingerprint: Fingerprint,
        logs: Path,
        phase: Phase,
        *,
        tree: Tree | None = None,
        others_sealed: Callable[[], bool] = lambda: True,
    ) -> None:
        cfg = campaign.config
        self.campaign = campaign
        if cfg.metric.direction is None:
            raise ValueError("the campaign's metric has no direction")
        self.direction: str = cfg.metric.direction
        self.workspace = workspace
        # Measurements run in a folder of the engine's own that holds exactly the commit
        # being measured, never in the proposer's workspace.
        self.tree: Tree = tree or MeasureTree(
            campaign.root,
            workspace.state_dir / "measure",
            list(cfg.share),
            workspace.exclude_file,
            workspace.submodule_gitdirs,
            # Path by path only while nothing that could reach the folder outlives its run:
            # the runs here in bubblewrap, and `others_sealed` (the proposer) says the same.
            sealed=lambda: executor.isolation == "bwrap" and others_sealed(),
        )
        self.executor = executor
        self.fingerprint = fingerprint
        self.logs = logs
        self.phase = phase
        sandbox = cfg.sandbox
        limits = Limits(sandbox.memory_mb, sandbox.cpu_seconds, sandbox.network)
        self.metric = metric_spec(cfg.metric, limits)
        # Secondary metrics and the composite score, read after each metric run.
        self.readings = Readings(cfg.metrics, cfg.metric.score)
        if cfg.metric.score is not None:  # the number comes from the formula, not stdout
            self.metric = replace(self.metric, parse=False)
        # Each version's secondary samples, for the constraints' reference.
        self.secondary: dict[str, Samples] = {}
        # With no metric command, the LLM judge is the metric.
        self.judge = (
            Judge(cfg.judge, campaign) if cfg.metric.command is None and cfg.judge else None
        )
        self.guard = (
            CommandSpec(cfg.guard.command, cfg.guard.timeout, parse=False, limits=limits)
            if cfg.guard
            else None
        )
        # What the metric and guard see that the proposer must not: kept out of reasons.
        self.hide = passed_values(sandbox.pass_env)
        # The samples of every version of the code: the pooled noise, the reference.
        self.book = SampleBook(cfg.decision.to_rule(), self.direction)
        # The metric's data files a holdout stands in for (`[holdout] in_place_of`): put in
        # place before every run, so a metric run and a holdout run find them alike.
        self.in_place: tuple[str, ...] = (
            tuple(cfg.holdout.in_place_of.values()) if cfg.holdout else ()
        )

    def decision_text(self) -> str:
        """What decides, and why (`rule = "auto"` names what it chose from the baseline)."""
        book = self.book
        return "decision: " + describe(book.configured, book.rule, book.first, self.direction)

    def detectable(self, incumbent: str) -> tuple[str, str | None]:
        """What this campaign can see at its measured noise, and a warning when that is
        coarser than the gains looked for ("" and None: any gain is seen)."""
        rule, samples = self.book.rule, self.book.groups.get(incumbent, [])
        if not samples:
            return "", None
        pool = self.book.pool(incumbent)
        smallest = detectable_gain(rule, pool.noise([], []))
        level = robust.median(samples)
        if smallest is None or not level:
            return "", None
        pct = 100 * smallest / abs(level)
        note = (
            f"detectable: gains of about {pct:.2g}% ({smallest:.4g}) or more are kept 4 times "
            f"in 5 within {rule.max_samples} runs a side at this noise"
        )
        wanted = rule.min_delta_abs(level)
        wanted_text = f"min_delta {wanted:.4g}"
        if wanted <= 0:
            wanted = WANTED_GAIN_PCT / 100 * abs(level)
            wanted_text = f"gains of {WANTED_GAIN_PCT:g}%"
        if smallest <= wanted:
            return note, None
        warning = (
            f"unstable benchmark: its noise lets this campaign see only gains of about "
            f"{pct:.2g}% or more, coarser than the {wanted_text} looked for; smaller real "
            "gains will be dropped. Remedies: repeat the workload inside the metric command "
            "and print the median, measure CPU time instead of wall time, set [metric] "
            "exclusive = true, pin the benchmark to cores (taskset), quiet the machine, or "
            "raise [decision] max_samples"
        )
        return note, warning

    def noise_learned(self) -> tuple[str | None, list[str]]:
        """What the campaign's noise looks like so far (None before enough runs to learn
        it) and every change of estimator `noise = "auto"` made, with why, in order."""
        book = self.book
        shape = None
        if book.shape:
            carry = carry_note(book.carry, book.rule.probe)
            shape = book.shape.describe() + states_text(book.gap) + carry
        return shape, list(book.switches)

    @property
    def rule(self) -> Rule:
        """The rule in force: the configured one, `auto` resolved once the baseline is in."""
        return self.book.rule

    # -- bookkeeping --------------------------------------------------------------------

    def load(self, records: Sequence[AttemptRecord]) -> None:
        """Rebuild the samples per commit from the ledger (for a resumed campaign)."""
        self.book.load(records)
        self.secondary = secondary_book(records)

    def incumbent_secondary(self, incumbent: str, out: Evaluation) -> Samples:
        """The incumbent's secondary samples: kept ones plus this comparison's."""
        known = self.secondary.get(incumbent, {})
        names = dict.fromkeys([*known, *out.incumbent_secondary])
        return {n: [*known.get(n, []), *out.incumbent_secondary.get(n, [])] for n in names}

    def env(self, iteration: int) -> dict[str, str]:
        env = measurement_env(self.campaign.config.sandbox.pass_env)
        env["AUTORESEARCH_ITERATION"] = str(iteration)
        env["AUTORESEARCH_WORKSPACE"] = str(self.tree.path)
        env["AUTORESEARCH_CAMPAIGN"] = self.campaign.name
        return env

    def discard(self) -> None:
        """Throw away what the last run wrote, at the end of a campaign. Best effort: a
        folder that is no longer the engine's is refused by the next run, never written."""
        try:
            self.tree.discard()
        except AutoresearchError:
            pass

    # -- single runs --------------------------------------------------------------------

    def _put_in_place(self, swap: Swap | None) -> None:
        """The data a run reads, as every run finds it: a holdout's bytes written over the
        commit's file (the same file, its mode and modification time kept), and for every
        run the change time of the files a holdout stands in for made now, so that neither
        the times nor the inode tell a holdout run from a metric run."""
        files = swap.files if swap is not None else {}
        for rel in dict.fromkeys([*self.in_place, *files]):
            target = real_parents(self.tree.path, rel)
            try:
                before: os.stat_result | None = os.lstat(target)
            except FileNotFoundError:
                before = None
            if rel in files:
                with open(files[rel], "rb") as source, open_own(target) as into:
                    shutil.copyfileobj(source, into)
            if before is not None and stat.S_ISREG(before.st_mode):
                os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns), follow_symlinks=False)

    def _run(
        self,
        spec: CommandSpec,
        commit: str,
        iteration: int,
        stem: str,
        out: Evaluation,
        swap: Swap | None = None,
    ) -> float | None:
        """One run on `commit`; None (and `out.failure`) when it fails. With `swap` (the
        holdout), its files stand in the folder for the run.

        The harness is verified before and after the run: a judge edited while it ran is
        caught, not silently restored with the rest of what the run wrote.
        """
        self.tree.show(commit)
        tampered = self.fingerprint.changed(self.campaign, self.tree.path)
        if tampered:
            out.failure, out.reason = Status.TAMPERED, f"{tampered} changed during the campaign"
            return None
        if self.judge is not None and spec is self.metric:
            return self._judge(stem, out)
        expect = swap.digests if swap is not None else {}
        measuring = spec is self.metric or swap is not None
        self._put_in_place(swap)
        around = self.fingerprint.around(self.campaign, self.tree.path)
        result = self._execute(spec, iteration, stem, measuring)
        if result.signal is not None and not self.fingerprint.changed(
            self.campaign, self.tree.path, expect
        ):
            # Ended from outside the engine (an OOM killer, another process's kill): not
            # the candidate's doing. Made once more from the commit's files; a second such
            # end stops the attempt (below, once the harness is checked after it too).
            out.seconds += result.seconds
            out.runs += 1
            self.tree.settle()
            self.tree.show(commit)
            self._put_in_place(swap)
            result = self._execute(spec, iteration, f"{stem}-again", measuring)
        if spec is self.metric and swap is None:
            machine.record(self.campaign.state_dir, run=stem, value=result.value, **result.hygiene)
        out.seconds += result.seconds
        out.runs += 1
        is_metric = spec is self.metric
        tampered = None
        if changed := self.fingerprint.changed(self.campaign, self.tree.path, expect):
            tampered = f"{changed} changed"
        elif joined := self.fingerprint.joined(self.campaign, self.tree.path, around):
            tampered = f"{joined} appeared"
        value = result.value if measuring else 0.0
        if not tampered and result.ok and is_metric and self.readings:
            # Read before the folder is cleaned: the files the run wrote go with it.
            value = self._readings(result.stdout_path, spec.timeout, value, out)
        self.tree.settle()
        if tampered:
            out.failure = Status.TAMPERED
            out.reason = f"{tampered} while the {'metric' if is_metric else 'guard'} ran"
            return None
        if result.signal is not None:
            out.failure = Status.INTERRUPTED
            out.reason = f"{'metric' if is_metric else 'guard'} {result.reason}, twice"
            out.reason = redact(out.reason, self.hide)
            return None
        if result.outcome == Status.TAMPERED:  # seen where it ran (a Ray worker)
            out.failure, out.reason = Status.TAMPERED, result.reason
            return None
        if not result.ok:
            out.failure = Status.TIMEOUT if result.outcome == Status.TIMEOUT else Status.CRASH
            out.reason = redact(f"{'metric' if is_metric else 'guard'} {result.reason}", self.hide)
            if not is_metric and out.failure is Status.CRASH:
                out.reason += last_lines(
                    result.stdout_path, self.logs / f"{stem}.err", hide=self.hide
                )
            return None
        return value

    def _execute(
        self, spec: CommandSpec, iteration: int, stem: str, measuring: bool
    ) -> Measurement:
        with machine.exclusive(measuring and self.campaign.config.metric.exclusive):
            # The harness read-only where it runs: a candidate cannot swap a harness file
            # and write the original back before the fingerprint is checked again.
            protected = replace(spec, protected=tuple(self.fingerprint.files))
            return self.executor.run(
                protected,
                workspace=self.tree.path,
                env=self.env(iteration),
                log_stem=self.logs / stem,
            )

    def _readings(
        self, stdout: Path, budget: float, value: float | None, out: Evaluation
    ) -> float | None:
        """One run's secondary values (kept on `out` as `last`), and the composite."""
        try:
            values = self.readings.read(stdout, self.tree.path, budget)
            if self.readings.score is not None:
                value = self.readings.composite(values)
        except MetricParseError as exc:
            out.failure, out.reason = Status.CRASH, redact(f"metric {exc}", self.hide)
            return None
        out.last = values
        return value

    def _judge(self, stem: str, out: Evaluation) -> float | None:
        assert self.judge is not None
        verdict = self.judge.score(self.tree.path, self.logs / stem)
        out.seconds += verdict.seconds
        out.runs += 1
        out.cost_usd += verdict.cost_usd
        out.tokens_in += verdict.tokens_in
        out.tokens_out += verdict.tokens_out
        if verdict.score is None:
            out.failure, out.reason = Status.CRASH, verdict.reason
        return verdict.score

    # -- what the engine asks for -------------------------------------------------------

    def baseline(self, commit: str) -> Evaluation:
        """Measure the starting code; on success `commit` is the incumbent."""
        out = Evaluation(verdict=Verdict.KEEP)
        count = self.rule.baseline_samples
        for k in range(count):
            self.phase("measuring", 0, sample=k + 1, samples=count)
            value = self._run(self.metric, commit, 0, f"0000-metric-{k + 1}", out)
            if value is None:
                return out
            out.samples.append(value)
            _add(out.secondary, out.last)
        self.book.baseline(commit, out.samples)
        self.secondary[commit] = {n: list(v) for n, v in out.secondary.items()}
        return out

    def evaluate(
        self, iteration: int, candidate: Candidate, commit: str, incumbent: str
    ) -> Evaluation:
        """Measure the candidate `commit` (and re-measure `incumbent`) until the rule
        decides."""
        out = Evaluation()
        try:
            return self._compare(iteration, commit, incumbent, out)
        finally:
            # Decided or cut short by a failure, the samples taken count: as a resumed
            # campaign reads them from the ledger.
            self.book.measured(commit, out.samples, incumbent, out.taken)
            if out.secondary:
                self.secondary[commit] = {n: list(v) for n, v in out.secondary.items()}

    def _compare(self, iteration: int, commit: str, incumbent: str, out: Evaluation) -> Evaluation:
        test = self.book.comparison(incumbent)
        out.taken = test.taken
        while isinstance(side := test.next(), Side):
            if side is Side.INCUMBENT:
                k = len(out.incumbent_samples) + 1
                self.phase(
                    "measuring", iteration, sample=k, samples=self.rule.cap, side="incumbent"
                )
                stem = f"{iteration:04d}-incumbent-{k}"
                value = self._run(self.metric, incumbent, iteration, stem, out)
                if value is None and test.held and out.failure is not Status.TAMPERED:
                    # The drop is decided; the run it waited for would only have told
                    # carry-over, and a failure of it is no verdict on the candidate.
                    out.failure, out.reason = None, ""
                    test.release()
                    break
                if value is None:
                    out.reason = f"re-measuring the incumbent: {out.reason}"
                    return out
                out.incumbent_samples.append(value)
                _add(out.incumbent_secondary, out.last)
                self.book.remeasured(incumbent, value)
            else:
                k = len(out.samples) + 1
                self.phase("measuring", iteration, sample=k, samples=self.rule.cap)
                stem = f"{iteration:04d}-metric-{k}"
                value = self._run(self.metric, commit, iteration, stem, out)
                if value is None:
                    return out
                out.samples.append(value)
                _add(out.secondary, out.last)
            test.add(value)
        out.verdict = test.verdict
        out.look = test.look
        out.reason = explain(self.rule, test.verdict, test.look)
        return out

    def measure_once(self, commit: str, stem: str, out: Evaluation) -> float | None:
        """One metric run of `commit` outside any comparison (`confirm`, `compare`)."""
        return self._run(self.metric, commit, 0, stem, out)

    def measure_swapped(
        self, spec: CommandSpec, commit: str, iteration: int, stem: str, swap: Swap
    ) -> Evaluation:
        """One run of `spec` on `commit` with `swap`'s files in place (the holdout's): the
        same folder, environment, sandbox and harness protection as a metric run."""
        out = Evaluation()
        value = self._run(spec, commit, iteration, stem, out, swap)
        if value is not None:
            out.samples.append(value)
        out.last.clear()
        return out

    def run_guard(self, iteration: int, commit: str) -> Evaluation:
        """Run the guard on `commit`."""
        out = Evaluation()
        if self.guard is not None:
            self.phase("guard", iteration)
            self._run(self.guard, commit, iteration, f"{iteration:04d}-guard", out)
        return out

    def kept(self, commit: str) -> None:
        """The candidate `commit` was kept: the samples it has now selected it."""
        self.book.kept(commit)


def _add(into: Samples, values: dict[str, float]) -> None:
    for name, value in values.items():
        into.setdefault(name, []).append(value)
    values.clear()


def secondary_book(records: Sequence[AttemptRecord]) -> dict[str, Samples]:
    """Each commit's secondary samples, from the ledger: its own and its re-measurements."""
    book: dict[str, Samples] = {}
    for record in records:
        if record.commit and record.metrics:
            mine = book.setdefault(record.commit, {})
            for name, values in samples_from(record.metrics).items():
                mine.setdefault(name, []).extend(values)
        if record.parent and record.metrics:
            theirs = book.setdefault(record.parent, {})
            for name, values in samples_from(record.metrics, "incumbent_samples").items():
                theirs.setdefault(name, []).extend(values)
    return book
