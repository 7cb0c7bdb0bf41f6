"""The samples a decision rule compares with: every version's samples, and which selected it.

This is the evaluator's bookkeeping without the measuring, so that it can be rebuilt from
the ledger alone: on resume, and by `verify`, which replays every recorded verdict with it.
It imports nothing that runs a command.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from autoresearch.stats import noise_model
from autoresearch.stats.auto_rule import resolve
from autoresearch.stats.decide import Comparison, Pool, Rule, Side, robust_noise, start_state
from autoresearch.stats.noise_model import LATER_KEEP_MARGIN, Carry, Choice, Learned, Runs, Shape
from autoresearch.stats.robust import change_point


class Kind(Protocol):
    """What the book asks of a record's status (`attempt.Status` answers it)."""

    @property
    def sets_best(self) -> bool: ...

    @property
    def kept_change(self) -> bool: ...


class Compared(Protocol):
    """One comparison's runs: the candidate `commit`'s and the incumbent `parent`'s."""

    @property
    def commit(self) -> str | None: ...

    @property
    def parent(self) -> str | None: ...

    @property
    def samples(self) -> Sequence[float] | None: ...

    @property
    def incumbent_samples(self) -> Sequence[float] | None: ...


class Recorded(Compared, Protocol):
    """The fields of a ledger record the book reads (`attempt.AttemptRecord` has them):
    the statistics import nothing else of the package. `earlier` holds the comparisons
    the attempt went through before its own (a parallel winner set aside)."""

    @property
    def status(self) -> Kind: ...

    @property
    def earlier(self) -> Sequence[Compared]: ...


def comparisons(record: Recorded) -> list[Compared]:
    """The comparisons of one record, in the order they were taken."""
    return [*record.earlier, record]


def sample_groups(records: Iterable[Recorded]) -> dict[str, list[float]]:
    """Every sample of each version of the code: its own runs plus later re-measurements,
    in the order `SampleBook.take` gives them."""
    groups: dict[str, list[float]] = {}
    for record in list(records):
        for part in comparisons(record):
            for version, samples in _taken(part):
                groups.setdefault(version, []).extend(samples)
    return groups


def _taken(part: Compared) -> list[tuple[str, Sequence[float]]]:
    """One comparison's runs by version, in the order the evaluator stamps them: the
    incumbent's re-measurements (`remeasured`, during the comparison), then the candidate's
    runs (`measured`, at its end)."""
    out: list[tuple[str, Sequence[float]]] = []
    if part.parent and part.incumbent_samples:
        out.append((part.parent, part.incumbent_samples))
    if part.commit and part.samples:
        out.append((part.commit, part.samples))
    return out


# A reference sample taken more than this many times `max_samples` runs of the campaign ago
# no longer tells the incumbent's level: on a machine whose speed wanders, a reference
# taken while it was faster screens out every candidate after it (each first run looks
# worse, so none re-measures the incumbent), and one taken while it was slower flatters
# them. A comparison whose reference has all gone stale starts as after a keep, with a
# fresh run of the incumbent.
REFERENCE_HORIZON = 2
# Nor does any taken before this many comparisons in a row that took no run of the
# incumbent (each candidate dropped on its own runs against it): when the machine slows
# down at once, every candidate's first run reads worse than a reference taken before and
# is dropped on it, one run a comparison, so the horizon in runs comes only after many
# attempts. The next comparison starts from fresh runs, and later ones keep to the runs
# taken since.
UNMEASURED_COMPARISONS = 3


class Clock:
    """When each version's samples were taken, counted in runs of the campaign."""

    def __init__(self) -> None:
        self.now = 0
        self.times: dict[str, list[int]] = {}

    def stamp(self, version: str, count: int) -> None:
        times = self.times.setdefault(version, [])
        for _ in range(count):
            self.now += 1
            times.append(self.now)

    def restamp(self, version: str, count: int) -> None:
        """`version`'s samples are now these `count` (a candidate's, as measured)."""
        self.times[version] = []
        self.stamp(version, count)

    def since(self, version: str, time: int) -> int:
        """How many of `version`'s samples were taken after `time`."""
        times = self.times.get(version, [])
        return len(times) - bisect_right(times, time)  # stamped in rising order


class SampleBook:
    """The samples of every version of the code measured so far, for the pooled noise and
    the incumbent's reference, and how many of a kept commit's samples selected it."""

    def __init__(self, rule: Rule, direction: str) -> None:
        # `rule = "auto"` becomes a rule once the baseline is known (`auto_rule.resolve`).
        self.configured = rule
        self.rule = rule
        self.first: list[float] = []  # the baseline's samples, which `auto` decides from
        self.origin = ""  # the baseline's commit
        self.direction = direction
        # Samples of each version of the code measured so far, for the pooled noise.
        self.groups: dict[str, list[float]] = {}
        # How many of a kept commit's samples were taken to select it. They are biased
        # in its favour (it was kept because they looked good), so comparisons use only
        # its later re-measurements.
        self.selected: dict[str, int] = {}
        # How many of a commit's samples were taken when it was measured itself (as the
        # baseline or as a candidate); the rest are re-measurements as the incumbent.
        self.own: dict[str, int] = {}
        # The boundary calibrated on the campaign's own residuals (`noise_model`), once
        # there are enough of them; None: the Gaussian calibration decides.
        self.learned: Learned | None = None
        # What the residuals look like, once learned, and why the estimator changed.
        self.shape: Shape | None = None
        self.switches: list[str] = []
        # When each sample was taken, counted in runs of the campaign: within a record
        # the incumbent's re-measurements first, as the evaluator adds them.
        self.clock = Clock()
        # Whether each sample followed a run of its own version (beside `groups`), and
        # each comparison's runs in the order taken: what carry-over is learned from.
        self.follows: dict[str, list[bool]] = {}
        self.sequences: list[tuple[str, Runs]] = []
        self.carry: Carry | None = None

    # -- from the ledger ----------------------------------------------------------------

    def load(self, records: Iterable[Recorded]) -> None:
        """Rebuild everything from the ledger's records (for a resumed campaign)."""
        self.groups, self.selected, self.own = {}, {}, {}
        self.clock = Clock()
        self.first, self.rule, self.origin = [], self.configured, ""
        self.learned, self.shape, self.switches = None, None, []
        self.follows, self.sequences, self.carry = {}, [], None
        for record in records:
            self.take(record)

    def take(self, record: Recorded) -> None:
        """Add one more ledger record: `load` of a ledger is `take` of each line in turn."""
        for part in comparisons(record):
            taken: Runs = ()
            if part.samples or part.incumbent_samples:
                # A comparison began here (`comparison` learns first): learn as it did,
                # and take its runs in the order it asked for them.
                self.learn()
                taken = self._replayed(part)
            # In the order the evaluator stamps them, so that a resumed campaign and
            # `verify` see the live clock.
            for version, samples in _taken(part):
                self.groups.setdefault(version, []).extend(samples)
                self.clock.stamp(version, len(samples))
                # Runs of one version alone (the baseline) each follow the one before; a
                # comparison's are ordered by its replay (`_ordered`).
                flags = [i > 0 and not part.parent for i in range(len(samples))]
                self.follows.setdefault(version, []).extend(flags)
            if part.commit and taken:
                self._ordered(part.parent or "", part.commit, taken)
        baseline = record.status.sets_best and not record.status.kept_change
        if baseline:
            self.first = list(record.samples or ())
            self.origin = record.commit or ""
            self._resolve()
        if record.commit and record.status.sets_best:
            # Every sample it has selected it (`kept`): a winner measured again alone after
            # a set-aside comparison has the runs of both.
            count = len(self.groups.get(record.commit, []))
            self.own[record.commit] = count
            if not baseline:
                self.selected[record.commit] = count

    # -- as measurements come in --------------------------------------------------------

    def baseline(self, commit: str, samples: list[float]) -> None:
        """The baseline `commit` was measured: its samples are its own."""
        self.groups[commit] = list(samples)
        self.follows[commit] = [i > 0 for i in range(len(samples))]
        self.clock.restamp(commit, len(samples))
        self.own[commit] = len(samples)
        self.first = list(samples)
        self.origin = commit
        self._resolve()

    def _resolve(self) -> None:
        """The rule the campaign starts with, from its baseline (`auto_rule.resolve`); under
        `noise = "auto"` judging only the runs after their own version until carry-over is
        measured (`_learn_carry`): a campaign cannot tell a run's carry-over before it has
        compared versions, and a real gain that every run after the incumbent hides is
        dropped before it could."""
        self.rule = resolve(self.configured, self.first, self.direction)
        if self.learns() and self.rule.adaptive:
            self.rule = replace(self.rule, carry=True, probe=True)
            self.switches.append(PROBE_TEXT)

    def remeasured(self, incumbent: str, value: float) -> None:
        """One more sample of the incumbent, taken during a candidate's comparison."""
        self.groups.setdefault(incumbent, []).append(value)
        self.follows.setdefault(incumbent, []).append(False)
        self.clock.stamp(incumbent, 1)

    def measured(
        self, commit: str, samples: list[float], incumbent: str = "", taken: Runs = ()
    ) -> None:
        """The candidate `commit` was measured (decided, or cut short by a failure) against
        `incumbent`, the comparison's runs in the order `taken`. A version measured again (a
        winner set aside, then measured alone; a candidate resumed) keeps the runs of both:
        all were runs of its code."""
        if samples:
            self.groups.setdefault(commit, []).extend(samples)
            self.follows.setdefault(commit, []).extend([False] * len(samples))
            self.clock.stamp(commit, len(samples))
        if taken and self.rule.name == "sequential":
            self._ordered(incumbent, commit, taken)

    def _ordered(self, incumbent: str, commit: str, taken: Runs) -> None:
        """Which of a comparison's runs, the last of `incumbent`'s and of `commit`'s
        samples, followed a run of their own version; and the comparison's runs for
        carry-over."""
        for version, side in ((incumbent, Side.INCUMBENT), (commit, Side.CANDIDATE)):
            flags = [follows for s, _, follows in taken if s is side]
            mine = self.follows.get(version, [])
            if flags and len(flags) <= len(mine):
                mine[len(mine) - len(flags) :] = flags
        self.sequences.append((incumbent, tuple(taken)))
        if self.learns() and self.rule.adaptive and (self.rule.probe or not self.rule.carry):
            self._learn_carry()

    def _replayed(self, part: Compared) -> Runs:
        """The runs of a recorded comparison in the order it took them: the comparison the
        book makes now, fed the recorded samples (as the live one was, from the same
        book). Empty where no sequential comparison was made."""
        if not part.parent or not part.commit or self.rule.name != "sequential":
            return ()
        if part.parent not in self.groups:
            return ()
        test = self.comparison(part.parent)
        test.feed(list(part.samples or ()), list(part.incumbent_samples or ()))
        return tuple(test.taken)

    def kept(self, commit: str) -> None:
        """The candidate `commit` was kept: the samples it has now selected it."""
        self.selected[commit] = self.own[commit] = len(self.groups.get(commit, []))

    # -- what a comparison starts from --------------------------------------------------

    def reference(self, incumbent: str) -> list[float]:
        """The incumbent samples a candidate is compared with."""
        samples = self.groups.get(incumbent, [])
        if self.rule.name != "sequential":
            return samples
        # By index into its samples: which are unbiased, judged (`Rule.carry`) and recent.
        unbiased = self.selected.get(incumbent, 0)
        at = [i for i in self._judged_at(incumbent) if i >= unbiased]
        if self.rule.estimator != "mean":
            # The machine changed under the incumbent (a neighbour started, the clock
            # dropped): compare only with what it measures since.
            at = at[self.drift_cut(incumbent, [samples[i] for i in at]) :]
        at = at[-self.rule.max_samples :]
        # Only its runs within the horizon, and since its reference last went stale for
        # want of a run, tell the incumbent's level now: both are the tail of its samples,
        # as all are in the order taken.
        horizon = REFERENCE_HORIZON * self.rule.max_samples
        fresh = self.clock.since(incumbent, self.clock.now - horizon)
        since = self.since_stale(incumbent)
        if since is not None:
            fresh = min(fresh, since)
        return [samples[i] for i in at if i >= len(samples) - fresh]

    def drift_cut(self, incumbent: str, unbiased: list[float]) -> int:
        """Where the incumbent's latest level began (`robust.change_point`), 0: no change."""
        return change_point(unbiased)

    def carried(self, incumbent: str) -> int:
        """How many reference samples earlier candidates' evaluations left behind."""
        own = self.own.get(incumbent, 0)
        remeasured = sum(1 for i in self._judged_at(incumbent) if i >= own)
        return max(0, min(len(self.reference(incumbent)), remeasured))

    def _judged_at(self, version: str) -> list[int]:
        """Which of `version`'s samples a comparison may judge, by index: all, or under
        `Rule.carry` those that followed a run of their own version."""
        if not self.rule.carry:
            return list(range(len(self.groups.get(version, []))))
        return self._after_own(version)

    def _after_own(self, version: str) -> list[int]:
        """Which of `version`'s samples followed a run of their own version, by index."""
        count = len(self.groups.get(version, []))
        follows = self.follows.get(version, [])
        return [i for i in range(count) if i < len(follows) and follows[i]]

    def judged_runs(self) -> tuple[dict[str, list[float]], dict[str, int]]:
        """Every version's samples a comparison may judge (`_judged_at`), and how many of
        those selected a kept version: what the noise is pooled and learned from."""
        if not self.rule.carry:
            return self.groups, self.selected
        groups: dict[str, list[float]] = {}
        selected: dict[str, int] = {}
        for version, samples in self.groups.items():
            at = self._judged_at(version)
            groups[version] = [samples[i] for i in at]
            if version in self.selected:
                selected[version] = sum(1 for i in at if i < self.selected[version])
        return groups, selected

    def comparison(self, incumbent: str) -> Comparison:
        """The procedure that decides on a candidate against `incumbent` now."""
        self.learn()
        carried = self.carried(incumbent)
        learned = self.learned
        if learned is not None and learned.option != self.rule.option:
            learned = None
        return Comparison(
            self.rule,
            self.direction,
            self.reference(incumbent),
            self.pool(incumbent),
            carried,
            prior=self.prior(incumbent),
            efficacy=None
            if learned is None
            else learned.efficacy(start_state(carried, self.rule.max_samples)),
        )

    def since_stale(self, incumbent: str) -> int | None:
        """How many of `incumbent`'s latest runs were taken since its reference last went
        stale for want of a run (`UNMEASURED_COMPARISONS`), None: it never did. Its runs
        are the tail of its samples, as the comparisons took them."""
        since: int | None = None
        unmeasured = 0
        for version, runs in self.sequences:
            if version != incumbent:
                unmeasured = 0
                continue
            if unmeasured >= UNMEASURED_COMPARISONS:
                since = 0
            took = sum(1 for side, _, _ in runs if side is Side.INCUMBENT)
            if since is not None:
                since += took
            unmeasured = 0 if took else unmeasured + 1
        return 0 if unmeasured >= UNMEASURED_COMPARISONS else since

    def pool(self, incumbent: str) -> Pool:
        """The runs the noise estimate pools, as a comparison against `incumbent` starts."""
        groups, _ = self.judged_runs()
        return Pool.of(groups, incumbent, self.rule.estimator, self.direction, self.gap)

    @property
    def gap(self) -> float:
        """The speed states' spacing (a share of the level) runs are folded by, 0: none."""
        if self.rule.estimator != "states" or self.learned is None:
            return 0.0
        return self.learned.gap

    def learns(self) -> bool:
        """Whether the boundary follows the campaign's own noise: `rule = "auto"` on a noisy
        metric (explicit rules behave as configured)."""
        return self.configured.name == "auto" and self.rule.name == "sequential"

    def residuals(self) -> list[float]:
        """The campaign's residuals so far (`noise_model.residuals`)."""
        return noise_model.residuals(*self.judged_runs(), self.direction)

    def learn(self) -> None:
        """Calibrate the boundary on the campaign's residuals when there are LEARN_MIN of
        them, and again whenever their count has grown by LEARN_GROWTH; under `noise =
        "auto"` choose the estimator then (`noise_model.choose`). A function of the samples
        at the start of each comparison, so a resumed campaign and `verify` learn the same
        at the same attempts."""
        if not self.learns():
            return
        groups, selected = self.judged_runs()
        count = noise_model.residual_count(groups, selected)
        learned = self.learned
        if count < noise_model.LEARN_MIN:
            return
        if learned is not None and count < learned.count * noise_model.LEARN_GROWTH:
            return
        choice = noise_model.choose(self.rule, groups, selected, self.direction)
        if choice is None:
            return
        self.shape = choice.shape
        estimator, first_keep = choice.learned.option
        if choice.learned.option != self.rule.option:
            self.switches.append(switch_text(self.rule, choice))
            self.rule = replace(self.rule, estimator=estimator, first_keep=first_keep)
        self.learned = choice.learned

    def _learn_carry(self) -> None:
        """Under `noise = "auto"`, after each comparison (what carry-over is read from
        grows by one), judge only the runs that follow a run of their own version once the
        campaign's comparisons show that a run carries enough of the one before
        (`noise_model.carry_over`). For the rest of the campaign: the boundary is
        calibrated again on the runs now judged."""
        # One run's noise from the runs that follow their own version: the others carry
        # the very differences being looked for.
        own = [
            [samples[i] for i in self._after_own(version)]
            for version, samples in self.groups.items()
        ]
        noise = robust_noise(own, "robust", self.direction)
        if noise is None or noise.sigma <= 0:
            return
        # The baseline's runs after its own are what the first comparisons' incumbent runs
        # after a candidate's are read against.
        baseline = self.groups.get(self.origin, [])
        start = {
            self.origin: [baseline[i] for i in self._after_own(self.origin) if i < len(self.first)]
        }
        carry = noise_model.carry_over(self.sequences, self.direction, noise.sigma, start)
        self.carry = carry
        if carry.found:
            self.switches.append(carry_text(carry))
            if not self.rule.probe:
                self.learned = None  # a new procedure: calibrated again
            self.rule = replace(self.rule, carry=True, probe=False)
        elif self.rule.probe and carry.absent:
            # Every run is judged from now on; should the comparisons later show carry-over
            # after all, it is judged after its own version again.
            self.switches.append(no_carry_text(carry))
            self.rule = replace(self.rule, carry=False, probe=False)
            self.learned = None

    def prior(self, incumbent: str) -> list[float]:
        """The samples that selected a kept incumbent: left out of its reference (biased
        in its favour), but what tells a spiked re-measurement from its level."""
        samples = self.groups.get(incumbent, [])
        chosen = self.selected.get(incumbent, 0)
        return [samples[i] for i in self._judged_at(incumbent) if i < chosen]


NAMES = {
    "robust": "the clipped mean",
    "time": "the better half (noise = time)",
    "mean": "the plain mean",
    "states": "the clipped mean within one speed state",
}


def option_text(estimator: str, first_keep: int) -> str:
    """One option `noise = "auto"` weighs, for a person."""
    name = NAMES[estimator]
    return name if first_keep == 1 else f"{name}, keeping from run {first_keep}"


def option_label(estimator: str, first_keep: int) -> str:
    """One option, short: what a switch goes from and to."""
    return estimator if first_keep == 1 else f"{estimator} (keeps from run {first_keep})"


def states_text(gap: float) -> str:
    """What a noise shape adds when runs are folded into one speed state ("": none)."""
    return f"; speed states {100 * gap:.3g}% apart" if gap > 0 else ""


def switch_text(before: Rule, choice: Choice) -> str:
    """Why `noise = "auto"` changed the estimator or the earliest keep, in one line."""
    after = choice.learned.option
    gains = ", ".join(f"{option_text(*o)} {gain:.3g}" for o, gain in choice.detectable.items())
    shape = choice.shape.describe() + states_text(choice.learned.gap)
    smallest = "the smallest gain"
    if choice.detectable.get(after, 0.0) > min(choice.detectable.values()):
        smallest = (
            "the smallest gain for its runs (judged after their own version, a later first "
            f"keep must detect at most {LATER_KEEP_MARGIN:g} of the gain to pay for the "
            "blocks it spares)"
        )
    return (
        f"estimator: {option_label(*before.option)} -> "
        f"{option_label(*after)}: the noise so far ({shape}) lets "
        f"{option_text(*after)} detect {smallest} at the false-keep rate calibrated on "
        f"the campaign's own residuals (gains kept 4 times in 5: {gains})"
    )


PROBE_TEXT = (
    "runs: judged only where they follow a run of their own version until the comparisons "
    "show how much a run carries of the one before (heat, caches a version leaves behind)"
)


def carry_note(carry: Carry | None, probing: bool = False) -> str:
    """What a noise shape adds while runs are judged only after their own version's
    ("": not)."""
    if probing:
        return "; runs judged after their own version until carry-over is measured"
    if carry is None or not carry.found:
        return ""
    return f"; a run carries {100 * carry.share:.0f}% of the one before (judged after its own)"


def no_carry_text(carry: Carry) -> str:
    """Why `noise = "auto"` began judging every run."""
    return f"runs: every run judged: {carry.bound()}, too little to hide a difference"


def carry_text(carry: Carry) -> str:
    """Why `noise = "auto"` began judging only the runs that follow their own version."""
    return (
        f"runs: judged only where they follow a run of their own version: {carry.describe()}"
        ", which hides that much of every difference; the other runs set up the next"
    )
