"""`kind = "optuna"`: tune named values in files with an Optuna study; no LLM needed.

Each attempt asks the study for a full set of values and writes them into the files; the
engine's verdict is told back, so the sampler learns from every attempt, failures included.
The study lives in `.autoresearch/<name>/optuna.journal`, so a resumed campaign continues it.
"""

from __future__ import annotations

import importlib.util
import threading
import warnings
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from autoresearch.attempt import Status
from autoresearch.errors import ConfigError
from autoresearch.proposers.base import (
    Outcome,
    Proposal,
    ProposalContext,
    Proposer,
    ProposerSetup,
)
from autoresearch.proposers.params import (
    ParamError,
    ParamRef,
    Scalar,
    format_value,
    read_param,
    write_param,
)
from autoresearch.scope import PathMatcher

# A duplicate is told the number its earlier twin measured (read from the ledger); a
# superseded or merged attempt's point was measured too (against an older incumbent, or
# combined with other winners): its number is still the best evidence the study gets.
MEASURED = (Status.KEEP, Status.DISCARD, Status.DUPLICATE, Status.SUPERSEDED, Status.MERGED)
# The point of such an attempt was never run: it stays to be tried.
UNMEASURED = (Status.INTERRUPTED, Status.PROPOSER_FAILED)
# A trial whose point was never measured is marked with this user attribute.


class ParamSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: list[Scalar] | None = None

    @model_validator(mode="after")
    def _shape(self) -> ParamSpec:
        if self.choices is not None:
            if self.low is not None or self.high is not None or self.step is not None:
                raise ValueError("give either 'choices' or 'low'/'high', not both")
            if not self.choices:
                raise ValueError("'choices' must not be empty")
            return self
        if self.low is None or self.high is None:
            raise ValueError("needs 'low' and 'high' (or 'choices')")
        if self.low >= self.high:
            raise ValueError(f"'low' ({self.low:g}) must be below 'high' ({self.high:g})")
        if self.log and self.low <= 0:
            raise ValueError("'log = true' needs 'low' above 0")
        if self.step is not None and self.step <= 0:
            raise ValueError("'step' must be positive")
        return self


# The samplers Optuna builds on scipy (`scipy.stats.qmc`).
NEEDS_SCIPY = frozenset({"qmc"})


class OptunaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    sampler: Literal["tpe", "random", "cmaes", "grid", "qmc"] = "tpe"
    seed: int | None = None
    startup_trials: int = Field(default=8, ge=1)
    space: dict[str, ParamSpec] = Field(min_length=1)


def _distribution(spec: ParamSpec, is_int: bool) -> Any:
    import optuna.distributions as d

    if spec.choices is not None:
        return d.CategoricalDistribution(spec.choices)
    assert spec.low is not None and spec.high is not None
    if is_int:
        return d.IntDistribution(
            int(spec.low), int(spec.high), log=spec.log, step=int(spec.step or 1)
        )
    return d.FloatDistribution(spec.low, spec.high, log=spec.log, step=spec.step)


def _short(ref: ParamRef, refs: list[ParamRef]) -> str:
    same = [r for r in refs if r.key == ref.key]
    return ref.key if len(same) == 1 else str(ref)


class OptunaProposer(Proposer):
    # Writes files only through the engine's own code: the user's checkout is safe.
    runs_commands = False
    # One study serves every slot with `[executor] jobs`: trials are asked while others
    # are in flight (TPE lies about them, `constant_liar`) and told as they land.
    parallel_safe = True

    def __init__(self, options: OptunaOptions, setup: ProposerSetup) -> None:
        self.options = options
        self.setup = setup
        try:
            self.refs = {name: ParamRef.parse(name) for name in options.space}
        except ParamError as exc:
            raise ConfigError(f"{setup.source}: key 'proposer.space': {exc}.") from None
        if options.sampler in NEEDS_SCIPY and importlib.util.find_spec("scipy") is None:
            # Optuna imports it only when the first point is asked for: the campaign would
            # start, measure its baseline and then fail every attempt.
            raise ConfigError(
                f"{setup.source}: key 'proposer.sampler': the {options.sampler} sampler needs "
                "scipy; install it with pip install 'autoresearch[optuna]' (or pip install "
                "scipy), or choose another sampler."
            )
        self.int_params = _int_params(setup.options)
        self.distributions: dict[str, Any] = {}
        for name, spec in options.space.items():
            is_int = self.int_params.get(name, False)
            if spec.log and spec.step is not None and not is_int:
                raise ConfigError(
                    f"{setup.source}: key 'proposer.space.\"{name}\"': 'log' and "
                    "'step' cannot be combined for real numbers."
                )
            self.distributions[name] = _distribution(spec, is_int)
        self.study: Any = None
        self.pending: dict[int, int] = {}  # the trial of each attempt in flight
        self.lock = threading.RLock()
        self._space: Any = None

    # -- validation ---------------------------------------------------------------------

    def validate(self, root: Path) -> None:
        """Every name must exist in its file with a value of the right type."""
        source = self.setup.source
        scope = PathMatcher(list(self.setup.scope))
        harness = PathMatcher(list(self.setup.harness))
        for name, ref in self.refs.items():
            where = f"{source}: key 'proposer.space.\"{name}\"'"
            if not scope.matches(ref.file) or harness.matches(ref.file):
                raise ConfigError(f"{where}: {ref.file} is not in 'scope'; add it to scope.")
            path = root / ref.file
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ConfigError(f"{where}: {ref.file} does not exist.") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{where}: {ref.file} cannot be read ({exc}).") from None
            try:
                current = read_param(text, ref)
            except ParamError as exc:
                raise ConfigError(f"{where}: {ref.file} {exc}.") from None
            problem = _type_problem(self.distributions[name], current)
            if problem:
                raise ConfigError(f"{where}: {ref.key} is {current!r} in {ref.file}, {problem}.")
        if self.options.sampler == "grid":
            self._grid_space()

    def _grid_space(self) -> dict[str, list[Any]]:
        import numpy as np
        import optuna.distributions as d

        grid: dict[str, list[Any]] = {}
        for name, dist in self.distributions.items():
            if isinstance(dist, d.CategoricalDistribution):
                grid[name] = list(dist.choices)
            elif isinstance(dist, d.IntDistribution):
                grid[name] = list(range(dist.low, dist.high + 1, dist.step))
            elif dist.step is not None:
                grid[name] = [
                    float(v) for v in np.arange(dist.low, dist.high + dist.step / 2, dist.step)
                ]
            else:
                raise ConfigError(
                    f"{self.setup.source}: key 'proposer.space.\"{name}\"': the grid "
                    "sampler needs 'step' or 'choices' for real numbers."
                )
        return grid

    def preflight(self, workspace: Path, offline: bool) -> str:
        """The sampler and how many points the space has; the study is not opened."""
        size = self.space().size
        points = f"{size} points" if size is not None else "a continuous space"
        return f"optuna, sampler {self.options.sampler} over {points}"

    # -- study --------------------------------------------------------------------------

    def _sampler(self) -> Any:
        """The configured sampler, wrapped so that a point already tried is never asked for."""
        import optuna

        from autoresearch.proposers.optuna_space import FreshSampler

        seed = self.options.seed
        kind = self.options.sampler
        inner: Any
        if kind == "random":
            inner = optuna.samplers.RandomSampler(seed=seed)
        elif kind == "grid":
            self._grid_space()  # refuses real ranges without a step
            inner = None  # every point once, in a seeded order
        elif kind == "qmc":
            inner = optuna.samplers.QMCSampler(seed=seed)
        elif kind == "cmaes":
            inner = optuna.samplers.CmaEsSampler(
                seed=seed, n_startup_trials=self.options.startup_trials
            )
        else:
            inner = optuna.samplers.TPESampler(
                seed=seed,
                n_startup_trials=self.options.startup_trials,
                multivariate=True,
                constant_liar=True,
            )
        return FreshSampler(inner, self.space())

    def space(self) -> Any:
        from autoresearch.proposers.optuna_space import Space

        if self._space is None:
            self._space = Space(self.distributions, self.options.seed)
        return self._space

    def _study(self) -> Any:
        if self.study is None:
            self.study = self._open()
        return self.study

    def _open(self) -> Any:
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend
        from optuna.trial import TrialState

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        self.setup.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.setup.state_dir / "optuna.journal"
        storage = JournalStorage(JournalFileBackend(str(path)))
        study = optuna.create_study(
            study_name=self.setup.name,
            storage=storage,
            sampler=self._sampler(),
            direction=self.setup.direction,
            load_if_exists=True,
        )
        # A trial left running by an engine that died was never measured: it is closed as
        # failed (Optuna has no other end for it) and its point stays untried.
        from autoresearch.proposers.optuna_space import UNTRIED_ATTR

        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            study._storage.set_trial_user_attr(trial._trial_id, UNTRIED_ATTR, True)
            study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
        return study

    def _seed_baseline(self, baseline: float | None, workspace: Path) -> None:
        """The unchanged values teach the sampler, and count as tried, when in the space."""
        import optuna

        study = self._study()
        if study.trials or baseline is None:
            return
        current = self._current(workspace)
        if all(_inside(self.distributions[n], v) for n, v in current.items()):
            study.add_trial(
                optuna.trial.create_trial(
                    params=current,
                    distributions=self.distributions,
                    value=baseline,
                    user_attrs={"autoresearch_iteration": 0},
                )
            )

    def exhausted(self) -> bool:
        """Every point of a finite space has been tried: nothing is left to propose."""
        with self.lock:
            return self._exhausted()

    def _exhausted(self) -> bool:
        from optuna.trial import TrialState

        space = self.space()
        if space.size is None:
            return False
        trials = self._study().get_trials(
            deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)
        )
        return bool(space.exhausted(space.tried(trials)))

    def _current(self, workspace: Path) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, ref in self.refs.items():
            values[name] = read_param((workspace / ref.file).read_text(encoding="utf-8"), ref)
        return values

    # -- protocol -----------------------------------------------------------------------

    def propose(self, ctx: ProposalContext) -> Proposal:
        with self.lock:
            self._seed_baseline(ctx.baseline, ctx.workspace)
            trial = self._study().ask(self.distributions)
            trial.set_user_attr("autoresearch_iteration", ctx.iteration)
            self.pending[ctx.iteration] = trial.number
        by_file: dict[str, list[tuple[str, ParamRef]]] = defaultdict(list)
        for name, ref in self.refs.items():
            by_file[ref.file].append((name, ref))
        changes: list[str] = []
        refs = list(self.refs.values())
        for file, items in by_file.items():
            path = ctx.workspace / file
            text = path.read_text(encoding="utf-8")
            for name, ref in items:
                value = trial.params[name]
                old = read_param(text, ref)
                if old != value or type(old) is not type(value):
                    text = write_param(text, ref, value)
                    changes.append(
                        f"{_short(ref, refs)} {format_value(old)} -> {format_value(value)}"
                    )
            path.write_text(text, encoding="utf-8")
        description = ", ".join(changes) if changes else "same values as the best"
        params = {name: trial.params[name] for name in self.refs}
        return Proposal(
            description=f"trial {trial.number}: {description}",
            params={**params, "optuna_trial": trial.number},
        )

    def observe(self, outcome: Outcome) -> None:
        with self.lock:
            self._observe(outcome)

    def _observe(self, outcome: Outcome) -> None:
        if outcome.iteration not in self.pending or self.study is None:
            return
        from optuna.trial import TrialState

        from autoresearch.proposers.optuna_space import UNTRIED_ATTR

        number = self.pending.pop(outcome.iteration)
        if outcome.status in UNMEASURED:
            trial_id = self.study._storage.get_trial_id_from_study_id_trial_number(
                self.study._study_id, number
            )
            self.study._storage.set_trial_user_attr(trial_id, UNTRIED_ATTR, True)
        if outcome.status in MEASURED and outcome.metric is not None:
            self.study.tell(number, outcome.metric, skip_if_finished=True)
        elif outcome.status == Status.NO_CHANGE and outcome.best is not None:
            self.study.tell(number, outcome.best, skip_if_finished=True)
        else:
            self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)

    def close(self) -> None:
        self.study = None


def _inside(dist: Any, value: Any) -> bool:
    """True when `value` is a point of `dist` (the baseline can then teach the sampler)."""
    if _type_problem(dist, value) is not None:
        return False
    try:
        return bool(dist._contains(dist.to_internal_repr(value)))
    except (ValueError, TypeError):
        return False


def _type_problem(dist: Any, value: Any) -> str | None:
    import optuna.distributions as d

    if isinstance(dist, d.CategoricalDistribution):
        kinds = {type(c) for c in dist.choices}
        if type(value) not in kinds and not (isinstance(value, int) and float in kinds):
            names = ", ".join(sorted(k.__name__ for k in kinds))
            return f"but the choices are of type {names}"
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "but the space is numeric; point it at a number"
    if isinstance(dist, d.IntDistribution) and not isinstance(value, int):
        return "but the space holds integers; write low/high as real numbers (e.g. 0.0)"
    if isinstance(dist, d.FloatDistribution) and isinstance(value, int):
        # Writing 2.5 where the code expects an integer fails every attempt (range(N)).
        return (
            "an integer, but the space holds real numbers; write low/high as integers "
            "(e.g. 0), or the value as a real number (e.g. 3.0)"
        )
    return None


def _int_params(raw: Mapping[str, Any]) -> dict[str, bool]:
    """Which numeric ranges the config wrote as integers (`low = 0`, not `low = 0.0`)."""
    out: dict[str, bool] = {}
    for name, spec in (raw.get("space") or {}).items():
        if not isinstance(spec, dict) or "choices" in spec:
            continue
        values = [spec.get(k) for k in ("low", "high", "step") if spec.get(k) is not None]
        out[name] = bool(values) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        )
    return out
