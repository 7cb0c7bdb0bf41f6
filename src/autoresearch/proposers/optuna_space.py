"""The points of an Optuna search space: which were tried, which remain, and a sampler that
never hands out a point already tried.

A space of categorical, integer and stepped real ranges is finite: once every point has
been tried there is nothing left, and the proposer says so (`space_exhausted`). Samplers
over small discrete spaces propose the same point again and again; a point already tried is
never asked for again, so the study's journal holds one trial per attempt and nothing else.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import optuna
import optuna.distributions as d
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

# A point as indices, one per parameter in the space's order.
Key = tuple[int, ...]

# Enumerated in full up to this many points; beyond it, untried points are drawn at random.
# A trial asked for but never told (the engine stopped first): its point is still untried.
UNTRIED_ATTR = "autoresearch_untried"
ENUMERATION_LIMIT = 200_000
# How often the wrapped sampler may propose a known point before one is picked for it.
RETRIES = 8


def _count(dist: Any) -> int | None:
    if isinstance(dist, d.CategoricalDistribution):
        return len(dist.choices)
    if isinstance(dist, d.IntDistribution):
        if dist.log:
            return dist.high - dist.low + 1
        return (dist.high - dist.low) // dist.step + 1
    if isinstance(dist, d.FloatDistribution) and dist.step is not None:
        return round((dist.high - dist.low) / dist.step) + 1
    return None  # a continuous range


def _index(dist: Any, value: Any) -> int | None:
    """The position of `value` among the points of `dist`, None when it is not one."""
    if isinstance(dist, d.CategoricalDistribution):
        for i, choice in enumerate(dist.choices):
            if type(choice) is type(value) and choice == value:
                return i
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(dist, d.IntDistribution):
        if not isinstance(value, int) or not dist.low <= value <= dist.high:
            return None
        step = 1 if dist.log else dist.step
        return None if (value - dist.low) % step else (value - dist.low) // step
    if isinstance(dist, d.FloatDistribution) and dist.step is not None:
        k = (float(value) - dist.low) / dist.step
        if abs(k - round(k)) > 1e-8 or not -1e-8 <= k <= (dist.high - dist.low) / dist.step + 1e-8:
            return None
        return round(k)
    return None


def _value(dist: Any, index: int) -> Any:
    if isinstance(dist, d.CategoricalDistribution):
        return dist.choices[index]
    if isinstance(dist, d.IntDistribution):
        return dist.low + index * (1 if dist.log else dist.step)
    assert isinstance(dist, d.FloatDistribution) and dist.step is not None
    return min(float(dist.low + index * dist.step), dist.high)


class Space:
    """The distributions of a study, with their points counted and enumerable."""

    def __init__(self, distributions: Mapping[str, Any], seed: int | None) -> None:
        self.distributions = dict(distributions)
        self.names = list(self.distributions)
        self.counts = [_count(dist) for dist in self.distributions.values()]
        self.seed = seed
        sizes = [c for c in self.counts if c is not None]
        self.size: int | None = math.prod(sizes) if len(sizes) == len(self.counts) else None

    def key(self, params: Mapping[str, Any]) -> Key | None:
        """The point `params` is, or None when it is not a point of this space."""
        if self.size is None or set(params) != set(self.names):
            return None
        found = []
        for name, dist in self.distributions.items():
            index = _index(dist, params[name])
            if index is None:
                return None
            found.append(index)
        return tuple(found)

    def params(self, key: Key) -> dict[str, Any]:
        return {
            name: _value(dist, i)
            for (name, dist), i in zip(self.distributions.items(), key, strict=True)
        }

    def tried(self, trials: Sequence[FrozenTrial]) -> set[Key]:
        """The points whose result is known: measured, or failed when measured."""
        out: set[Key] = set()
        for trial in trials:
            if trial.state not in (TrialState.COMPLETE, TrialState.FAIL):
                continue
            if trial.user_attrs.get(UNTRIED_ATTR):
                continue
            key = self.key(trial.params)
            if key is not None:
                out.add(key)
        return out

    def in_flight(self, trials: Sequence[FrozenTrial], asking: int) -> set[Key]:
        """The points of trials still running, other than the one being asked for."""
        keys = (self.key(t.params) for t in trials if t.number != asking)
        return {k for k in keys if k is not None}

    def exhausted(self, tried: set[Key]) -> bool:
        return self.size is not None and len(tried) >= self.size

    def _all(self) -> Iterator[Key]:
        assert self.size is not None
        return itertools.product(*(range(c or 0) for c in self.counts))

    def untried(self, tried: set[Key], rng: random.Random, ordered: bool = False) -> Key | None:
        """A point not in `tried`: the first of a seeded order for `ordered`, else at random."""
        if self.size is None or len(tried) >= self.size:
            return None
        if self.size <= ENUMERATION_LIMIT:
            if ordered:
                order = list(self._all())
                random.Random(self.seed).shuffle(order)
                return next(k for k in order if k not in tried)
            return rng.choice([k for k in self._all() if k not in tried])
        if ordered:
            return next(k for k in self._all() if k not in tried)
        while True:  # the space is large and mostly untried: a few draws suffice
            key = tuple(rng.randrange(c or 1) for c in self.counts)
            if key not in tried:
                return key


class FreshSampler(BaseSampler):
    """Samples every parameter at once through `inner`; a point already tried is asked for
    again, and after a few repeats an untried point is picked instead. `inner = None` walks
    the points in a seeded order (the grid)."""

    def __init__(self, inner: BaseSampler | None, space: Space) -> None:
        self.inner = inner
        self.space = space
        self.rng = random.Random(space.seed)

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, d.BaseDistribution]:
        return dict(self.space.distributions)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, d.BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
        tried = self.space.tried(trials)
        # Points in flight in other slots (`[executor] jobs`) are not asked for twice.
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        tried |= self.space.in_flight(running, trial.number)
        point: dict[str, Any] = {}
        if self.inner is not None:
            for _ in range(RETRIES):
                point = self._inner_point(study, trial)
                key = self.space.key(point)
                if key is None or key not in tried:
                    return point
        key = self.space.untried(tried, self.rng, ordered=self.inner is None)
        if key is None:  # nothing left: the proposer stops before asking; be safe anyway
            return point or self._inner_point(study, trial)
        return self.space.params(key)

    def _inner_point(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        inner = self.inner or optuna.samplers.RandomSampler(seed=self.rng.randrange(2**31))
        wanted = self.space.distributions
        relative = {
            name: dist
            for name, dist in inner.infer_relative_search_space(study, trial).items()
            if name in wanted and wanted[name] == dist
        }
        point = dict(inner.sample_relative(study, trial, relative)) if relative else {}
        for name, dist in wanted.items():
            if name not in point:
                point[name] = inner.sample_independent(study, trial, name, dist)
        return point

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: Any
    ) -> Any:
        inner = self.inner or optuna.samplers.RandomSampler(seed=self.rng.randrange(2**31))
        return inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        if self.inner is not None:
            self.inner.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        if self.inner is not None:
            self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        if self.inner is not None:
            self.inner.reseed_rng()
