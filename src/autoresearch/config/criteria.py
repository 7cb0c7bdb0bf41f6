"""The config tables that judge beyond the primary number: `[[metrics]]` with their
constraints, `[decision] simplicity`, `[holdout]` and `[approval]`.

They live apart from config.py so that the judging code can import them without the
whole config, and config.py only adds them as fields.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

from autoresearch.measure.expression import Expression, ExpressionError
from autoresearch.scope import glob_problem

METRIC_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
Int = Annotated[int, Strict()]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def parse_tolerance(value: float | str) -> tuple[float, bool]:
    """(amount, is_percent) for `0.5` or `"2%"`; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError("must be a number or a percentage like '2%', not true or false")
    if isinstance(value, int | float):
        amount, percent = float(value), False
    else:
        text = value.strip()
        percent = text.endswith("%")
        try:
            amount = float(text[:-1] if percent else text)
        except ValueError:
            raise ValueError(f"must be a number or a percentage like '2%', not {value!r}") from None
    if not math.isfinite(amount) or amount < 0:
        raise ValueError("must be a finite number, not negative")
    return amount, percent


def _check_file(file: str | None) -> None:
    if file is not None and (file.startswith("/") or ".." in file.split("/") or not file.strip()):
        raise ValueError("'file' must be a path inside the workspace")


def _check_pattern(value: str | None) -> None:
    if value is None:
        return
    try:
        compiled = re.compile(value)
    except re.error as exc:
        raise ValueError(f"'pattern' is not a valid regular expression ({exc})") from None
    if compiled.groups != 1:
        raise ValueError(
            f"'pattern' must have exactly one group around the number, it has {compiled.groups}"
        )


class SecondaryMetric(_Table):
    """One `[[metrics]]` entry: a number the metric command reports beside the primary.

    By default it is read from a `METRIC <name>=<value>` line of the metric command's
    output; `pattern` reads it from stdout with a regex, `file` (+ `key`) from a file the
    command wrote. `max`, `min` and `no_regress` are constraints every kept candidate meets.
    """

    name: str
    direction: Literal["minimize", "maximize"] | None = None
    pattern: str | None = None
    file: str | None = None
    key: str | None = None
    max: float | None = None
    min: float | None = None
    no_regress: float | str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not METRIC_NAME_RE.fullmatch(value):
            raise ValueError(
                "must be a name like 'latency_ms' (letters, digits, '_'; no leading digit)"
            )
        return value

    @field_validator("no_regress", mode="before")
    @classmethod
    def _tolerance(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a number or a percentage like '2%', not true or false")
        if isinstance(value, int | float | str):
            parse_tolerance(value)
        return value

    @model_validator(mode="after")
    def _sources(self) -> SecondaryMetric:
        if self.key is not None and self.file is None:
            raise ValueError("'key' reads a value from 'file'; set 'file' too")
        _check_file(self.file)
        _check_pattern(self.pattern)
        if self.no_regress is not None and self.direction is None:
            raise ValueError(
                f"metric {self.name!r}: 'no_regress' needs 'direction' ('minimize' or "
                "'maximize') to know which way is worse"
            )
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(
                f"metric {self.name!r}: 'min' {self.min:g} is above 'max' {self.max:g}"
            )
        return self

    @property
    def constrained(self) -> bool:
        return self.max is not None or self.min is not None or self.no_regress is not None

    def tolerance(self) -> tuple[float, bool]:
        return parse_tolerance(self.no_regress if self.no_regress is not None else 0.0)


def check_score(value: str | None) -> str | None:
    """A `[metric] score` formula that parses in the safe grammar."""
    if value is None:
        return value
    try:
        Expression(value)
    except ExpressionError as exc:
        raise ValueError(str(exc)) from None
    return value


class SimplicityConfig(_Table):
    """`[decision] simplicity`: the gain a change must bring per changed line.

    `lines_per_unit`: how many changed lines one unit of gain (in the metric's units, or
    one percent of the incumbent with `percent = true`) pays for. A change that is no
    better or worse within noise but removes more lines than it adds is kept as a
    simplification (`keep_simplifications`)."""

    lines_per_unit: float = Field(default=100.0, gt=0)
    percent: bool = True
    keep_simplifications: bool = True


class HoldoutConfig(_Table):
    """`[holdout]`: a second measurement the proposer never sees, run on a candidate about
    to be kept and on the final best. Its files live only in the user's checkout.

    `in_place_of` maps each holdout file to the file of the commit it stands in for (the
    metric's data): the holdout run is then the metric's run on other bytes at the same
    paths. Without `command` the metric's command (and how its number is read) runs."""

    command: str | None = Field(default=None, min_length=1)
    in_place_of: dict[str, str] = Field(default_factory=dict)
    pattern: str | None = None
    file: str | None = None
    key: str | None = None
    name: str | None = None
    direction: Literal["minimize", "maximize"] | None = None  # default: the primary's
    timeout: float = Field(default=600, gt=0, le=10_000_000)
    files: list[str] = Field(default_factory=list)
    min_delta: float | str = 0.0

    @model_validator(mode="after")
    def _sources(self) -> HoldoutConfig:
        if self.key is not None and self.file is None:
            raise ValueError("'key' reads a value from 'file'; set 'file' too")
        _check_file(self.file)
        _check_pattern(self.pattern)
        for pattern in self.files:
            problem = glob_problem(pattern)
            if problem:
                raise ValueError(f"'files': {pattern!r} {problem}")
            if pattern.startswith("/") or ".." in pattern.split("/"):
                raise ValueError(f"'files': {pattern!r} must be relative to the repository")
        for source, target in self.in_place_of.items():
            for path in (source, target):
                if (
                    not path
                    or path.startswith("/")
                    or ".." in path.split("/")
                    or path.endswith("/")
                    or any(ch in path for ch in "*?[")
                ):
                    raise ValueError(
                        f"'in_place_of': {path!r} must be one file's path, relative to the "
                        "repository"
                    )
        targets = list(self.in_place_of.values())
        for target in targets:
            if targets.count(target) > 1:
                raise ValueError(f"'in_place_of': {target!r} is replaced twice; name it once")
        parse_tolerance(self.min_delta)
        return self


class ApprovalConfig(_Table):
    """`[approval] paths`: a candidate touching these waits for a person's decision."""

    paths: list[str] = Field(min_length=1)

    @field_validator("paths")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            problem = glob_problem(pattern)
            if problem:
                raise ValueError(f"{pattern!r} {problem}")
        return value


def check_metrics(metrics: list[SecondaryMetric]) -> list[SecondaryMetric]:
    names = [m.name for m in metrics]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"the metric name {name!r} is used twice; names must be unique")
    return metrics
