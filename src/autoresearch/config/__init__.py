"""Read `autoresearch.toml` (or pyproject's `[tool.autoresearch]`) into a validated Campaign."""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from autoresearch.config.criteria import (
    ApprovalConfig,
    HoldoutConfig,
    SecondaryMetric,
    SimplicityConfig,
    check_metrics,
    check_score,
)
from autoresearch.errors import ConfigError
from autoresearch.isolation.sandbox import DEFAULT_DENY_READ
from autoresearch.llm import ChatSettings
from autoresearch.scope import MIB, Caps, PathMatcher, glob_problem
from autoresearch.stats.decide import Rule
from autoresearch.stats.paired import DEFAULT_PAIRS, MOST_PAIRS, MOST_REPEAT, pairs_asked

CONFIG_FILE = "autoresearch.toml"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32  # tables and arrays inside each other; a real config needs a handful
MAX_SECONDS = 10_000_000.0  # about 115 days: longer is a typo, and overflows timers

# `true` is not a number: pydantic's lax mode would read it as 1.
Int = Annotated[int, Strict()]
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]


def _refuse_bool(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, bool) and info.field_name is not None:
        annotation = cls.model_fields[info.field_name].annotation
        if annotation is not bool and bool not in get_args(annotation):
            raise ValueError("must not be true or false")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool(cls, value: Any, info: ValidationInfo) -> Any:
        return _refuse_bool(cls, value, info)


class MetricConfig(_Strict):
    command: str | None = Field(default=None, min_length=1)
    direction: Literal["minimize", "maximize"] | None = None
    pattern: str | None = None
    timeout: Seconds = 600
    target: float | None = None
    file: str | None = None
    key: str | None = None
    name: str | None = None
    score: str | None = None  # a composite of [[metrics]] / METRIC values (criteria.py)
    # "time": disturbances only make the number worse (timings, throughput); the robust
    # rule then trusts each side's better runs. "symmetric": the clipped mean. "auto" (the
    # default): the robust rule's estimator follows the shape of the campaign's own noise.
    noise: Literal["auto", "symmetric", "time"] = "auto"
    # Never measured beside another candidate of the campaign, and under a machine-wide lock
    # so that two campaigns on one machine do not time each other.
    exclusive: bool = False

    @model_validator(mode="after")
    def _sources(self) -> MetricConfig:
        if self.score is not None and (self.file or self.name or self.pattern or self.key):
            raise ValueError(
                "'score' computes the metric from named values; drop 'file', "
                "'key', 'name' and 'pattern'"
            )
        if self.key is not None and self.file is None:
            raise ValueError("'key' reads a value from 'file'; set 'file' too")
        if self.name is not None and (self.file is not None or self.pattern is not None):
            raise ValueError("'name' picks a METRIC line on stdout; drop 'file' or 'pattern'")
        if self.file is not None and (
            self.file.startswith("/") or ".." in self.file.split("/") or not self.file.strip()
        ):
            raise ValueError("'file' must be a path inside the workspace")
        if self.name is not None and not re.fullmatch(r"[\w.\-/]+", self.name):
            raise ValueError("'name' must be a metric name like 'loss' or 'val.acc'")
        return self

    @field_validator("score")
    @classmethod
    def _score(cls, value: str | None) -> str | None:
        return check_score(value)

    @field_validator("pattern")
    @classmethod
    def _one_group(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression ({exc})") from None
        if compiled.groups != 1:
            raise ValueError(
                f"must have exactly one group around the number, it has {compiled.groups}"
            )
        return value


class GuardConfig(_Strict):
    command: str = Field(min_length=1)
    timeout: Seconds = 600
    rework: Int = Field(default=0, ge=0, le=10)  # tries the proposer gets to fix a failure


class StopConfig(_Strict):
    max_iterations: Int = Field(default=20, ge=0)
    plateau: Int = Field(default=0, ge=0)
    max_minutes: float = Field(default=0, ge=0, le=MAX_SECONDS / 60)
    max_cost_usd: float | None = Field(default=None, ge=0)
    # attempts without a keep before the strategy rotates / the next [[proposer]] (0 = off)
    escalate_after: Int = Field(default=0, ge=0)
    # the same failure this many times in a row escalates at once (0 = off)
    breaker_after: Int = Field(default=3, ge=0)
    ablate: bool = False  # leave-one-out over the kept changes when the campaign ends


class ProposerConfig(BaseModel):
    """The proposer's own keys are validated by the proposer kind that owns them."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str = "command"

    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class DecisionConfig(_Strict):
    rule: Literal["strict", "threshold", "repeats", "sequential", "auto"] = "auto"
    # How `sequential` reduces a side's runs to one number: "mean" by default, "median",
    # "robust" or "time" (see robust.py); `auto` uses "robust", or "time" under
    # `[metric] noise = "time"`.
    estimator: Literal["mean", "median", "robust", "time"] | None = None
    min_delta: float | str = 0.0
    repeats: Int = Field(default=5, ge=2, le=1000)
    max_samples: Int = Field(default=8, ge=2, le=1000)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    simplicity: bool | SimplicityConfig = False  # a gain must pay for its diff size
    # Interleaved pairs `run` measures at the end to confirm a noisy campaign's best (0: no).
    # Left out, 10 and up to 20 where they leave a gain open; set alone, exactly that many.
    confirm: Int = Field(default=DEFAULT_PAIRS, ge=0, le=MOST_REPEAT)
    # The most pairs that confirm takes where the first `confirm` leave a gain open.
    confirm_up_to: Int | None = Field(default=None, ge=1, le=MOST_PAIRS)
    # Set by the campaign from `[metric] noise = "auto"`: the estimator may follow the
    # noise's learned shape when none is configured.
    _adaptive: bool = PrivateAttr(default=False)

    @field_validator("min_delta", mode="before")
    @classmethod
    def _delta(cls, value: Any) -> Any:
        if isinstance(value, int | float | str):
            parse_min_delta(value)
        return value

    @model_validator(mode="after")
    def _confirm_up_to(self) -> DecisionConfig:
        try:
            self.confirm_pairs()  # refuses what `confirm --repeat N --up-to M` refuses
        except ValueError as exc:
            raise ValueError(str(exc).rstrip(".")) from None  # the loader ends the sentence
        return self

    def confirm_pairs(self) -> tuple[int, int]:
        """The end-of-run confirm's first look and most pairs, read as `confirm --repeat
        N --up-to M` reads its options (0 pairs: none)."""
        if not self.confirm:
            return 0, 0
        given = "confirm" in self.model_fields_set
        return pairs_asked(
            self.confirm if given else None, self.confirm_up_to, ("confirm", "confirm_up_to")
        )

    def to_rule(self) -> Rule:
        """The rule as the plain value `decide` works with."""
        amount, percent = parse_min_delta(self.min_delta)
        estimator = self.estimator or ("robust" if self.rule == "auto" else "mean")
        adaptive = self._adaptive and self.estimator is None and self.rule == "auto"
        return Rule(
            self.rule,
            amount,
            percent,
            self.repeats,
            self.max_samples,
            self.confidence,
            estimator,
            adaptive,
        )


def parse_min_delta(value: float | str) -> tuple[float, bool]:
    """Return (amount, is_percent) for `0.01` or `"0.5%"`."""
    if isinstance(value, bool):
        raise ValueError("must be a number or a percentage like '0.5%', not true or false")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        if value < 0:
            raise ValueError("must not be negative")
        return float(value), False
    text = value.strip()
    percent = text.endswith("%")
    try:
        amount = float(text[:-1] if percent else text)
    except ValueError:
        raise ValueError(f"must be a number or a percentage like '0.5%', not {value!r}") from None
    if not math.isfinite(amount):
        raise ValueError("must be a finite number")
    if amount < 0:
        raise ValueError("must not be negative")
    return amount, percent


class SandboxConfig(_Strict):
    """Limits for the metric and guard commands, and what the engine watches."""

    watch_checkout: bool = True  # halt if the user's checkout changes while a proposer runs
    pass_env: list[str] = Field(default_factory=list)  # secrets the metric and guard may see
    # address-space limit per command (0 = off); at most 1 PiB
    memory_mb: Int = Field(default=0, ge=0, le=1 << 30)
    # CPU-time limit per command (0 = off); at most about 30 years
    cpu_seconds: Int = Field(default=0, ge=0, le=1_000_000_000)
    network: bool = True  # false: metric and guard run without network (needs unshare)
    # "auto": bubblewrap where it works, else none with a warning; "bwrap": refuse without it
    isolation: Literal["auto", "bwrap", "none"] = "auto"
    # paths a sandboxed command may not read (default: the usual credential folders)
    deny_read: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY_READ))
    writable: list[str] = Field(default_factory=list)  # more paths a sandboxed command may write
    # what a sandboxed command sees of the home folder besides the toolchain folders
    # (read-only; "~" shows it whole)
    home_readable: list[str] = Field(default_factory=list)
    # device nodes shown to sandboxed commands: "auto" (the machine's GPUs), "none", or nodes
    devices: Literal["auto", "none"] | list[str] = "auto"

    @field_validator("devices")
    @classmethod
    def _devices(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            for item in value:
                if not item.strip():
                    raise ValueError("lists an empty path")
                if not item.startswith(("/", "~")):
                    raise ValueError(f"{item!r} is not an absolute path (such as /dev/nvidia0)")
        return value


class ExecutorConfig(_Strict):
    """How many candidates are in flight at once, and where they are measured."""

    kind: Literal["local", "ray"] = "local"
    jobs: Int = Field(default=1, ge=1, le=256)  # proposals in flight
    measure_jobs: Int | None = Field(default=None, ge=1, le=256)  # measurements at once
    gpus: list[Int] = Field(default_factory=list)  # one CUDA_VISIBLE_DEVICES id per slot
    cpus_per_job: Int = Field(default=0, ge=0, le=4096)  # cores pinned per slot (0 = off)
    address: str = "auto"  # ray: "auto", "local" or "ray://host:port"
    num_cpus: float = Field(default=1.0, ge=0)  # ray: per measurement task
    num_gpus: float = Field(default=0.0, ge=0)  # ray: per measurement task
    runtime_env: dict[str, Any] = Field(default_factory=dict)  # ray: passed to ray.init

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: list[int]) -> list[int]:
        if any(g < 0 for g in value):
            raise ValueError("GPU ids must be 0 or more")
        if len(set(value)) != len(value):
            raise ValueError("lists a GPU id twice")
        return value


class TrackingConfig(_Strict):
    mlflow: bool = False  # one MLflow run per campaign (honours MLFLOW_TRACKING_URI)
    experiment: str | None = None  # default: autoresearch-<name>


class JudgeConfig(ChatSettings):
    """An LLM that scores files against a rubric; the metric when no metric command is set."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    rubric: str = Field(min_length=1)
    files: list[str] = Field(min_length=1)
    rounds: Int = Field(default=3, ge=1, le=15)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool(cls, value: Any, info: ValidationInfo) -> Any:
        return _refuse_bool(cls, value, info)

    @field_validator("files")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        return _check_globs(value)


def _check_globs(value: list[str]) -> list[str]:
    for pattern in value:
        problem = glob_problem(pattern)
        if problem:
            raise ValueError(f"{pattern!r} {problem}")
    return value


class ScopeLimits(_Strict):
    """What one candidate may hold: `[scope] max_file_mb` and `max_files` beside `paths`."""

    # the largest file a candidate may write, in MiB (1 TiB at most: more is a typo)
    max_file_mb: float = Field(default=100, gt=0, le=1 << 20)
    # how many files one candidate may change (create, edit or delete)
    max_files: Int = Field(default=10_000, ge=1, le=100_000_000)

    def caps(self) -> Caps:
        return Caps(max_bytes=int(self.max_file_mb * MIB), max_files=self.max_files)


def _scope_table(data: Any) -> Any:
    """`scope` is a list of globs, or a table: `[scope] paths = [...]` with the limits."""
    if not isinstance(data, dict) or not isinstance(data.get("scope"), dict):
        return data
    data = dict(data)
    table = dict(data.pop("scope"))
    if "paths" in table:
        data["scope"] = table.pop("paths")
    data["scope_limits"] = table
    return data


class CampaignConfig(_Strict):
    name: str
    goal: str = ""
    instructions: str | None = None
    scope: list[str] = Field(min_length=1)
    # written as `[scope] max_file_mb`, `max_files` (the table form of `scope`)
    scope_limits: ScopeLimits = Field(default_factory=ScopeLimits)
    harness: list[str] = Field(default_factory=list)
    share: list[str] = Field(default_factory=list)
    metric: MetricConfig = Field(default_factory=MetricConfig)
    judge: JudgeConfig | None = None
    guard: GuardConfig | None = None
    stop: StopConfig = Field(default_factory=StopConfig)
    proposer: ProposerConfig = Field(default_factory=ProposerConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    decision: DecisionConfig = Field(default_factory=DecisionConfig)
    ideas: str = "autoresearch.ideas.md"  # the ideas backlog in the checkout ("" = none)
    # `[[proposer]]` tables in order (the first is `proposer`); empty for one `[proposer]`
    proposers: list[ProposerConfig] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _proposer_list(cls, data: Any) -> Any:
        from autoresearch.config.escalation import split_proposers

        return split_proposers(_scope_table(data))

    @field_validator("ideas")
    @classmethod
    def _ideas(cls, value: str) -> str:
        if value and (value.startswith("/") or ".." in value.split("/") or value.endswith("/")):
            raise ValueError("must be a file path inside the repository, without '..'")
        if value.startswith((".autoresearch", ".git/")) or value == ".git":
            raise ValueError(f"{value!r} names a folder the engine owns")
        return value

    metrics: list[SecondaryMetric] = Field(default_factory=list)
    holdout: HoldoutConfig | None = None
    approval: ApprovalConfig | None = None

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: list[SecondaryMetric]) -> list[SecondaryMetric]:
        return check_metrics(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.fullmatch(value) or ".." in value or value.endswith((".lock", ".")):
            raise ValueError(
                "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("scope", "harness", "share")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        _check_globs(value)
        for pattern in value:
            if not pattern.strip():
                raise ValueError("must not contain empty patterns")
            if pattern.startswith("/") or any(part == ".." for part in pattern.split("/")):
                raise ValueError(f"{pattern!r} must be relative to the repository, without '..'")
            if (
                pattern.startswith(".autoresearch")
                or pattern == ".git"
                or pattern.startswith(".git/")
            ):
                raise ValueError(f"{pattern!r} names a folder the engine owns")
        return value

    @model_validator(mode="after")
    def _noise(self) -> CampaignConfig:
        # `[metric] noise = "time"` picks the one-sided estimator unless one is set.
        if self.metric.noise == "time" and self.decision.estimator is None:
            decision = self.decision.model_copy(update={"estimator": "time"})
            object.__setattr__(self, "decision", decision)
        self.decision._adaptive = self.metric.noise == "auto"
        return self

    @model_validator(mode="after")
    def _overlap(self) -> CampaignConfig:
        harness = PathMatcher(self.harness)
        for pattern in self.scope:
            if not any(ch in pattern for ch in "*?[") and harness.matches(pattern.rstrip("/")):
                raise ValueError(
                    f"{pattern!r} is both in scope and in harness; a file the proposer may "
                    "change cannot be part of its judge"
                )
        return self


@dataclass(frozen=True)
class Campaign:
    """A validated configuration plus where it came from."""

    config: CampaignConfig
    root: Path
    config_path: Path

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def state_dir(self) -> Path:
        return self.root / ".autoresearch" / self.config.name

    def display_path(self) -> str:
        try:
            return str(self.config_path.relative_to(self.root))
        except ValueError:
            return str(self.config_path)


# How pydantic names the member of a union that failed; never a config key.
_UNION_TAGS = ("float", "int", "str", "bool", "list[str]", "none")


def _format_loc(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if item == "scope_limits" and not parts:  # how `[scope]` keys are held
            item = "scope"
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        elif item in ("function-after", "function-before", *_UNION_TAGS) or str(item).startswith(
            ("literal[", "function-")
        ):
            continue
        else:
            parts.append(str(item))
    return ".".join(parts) or "(top level)"


def format_validation_error(source: str, exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    key = _format_loc(tuple(err.get("loc", ())))
    kind = err.get("type", "")
    msg = str(err.get("msg", "is invalid"))
    msg = msg.removeprefix("Value error, ")
    if kind == "missing":
        return f"{source}: key '{key}' is missing; add it (see `autoresearch init` for an example)."
    if kind == "extra_forbidden":
        return f"{source}: key '{key}' is not a known setting; remove it or check its spelling."
    shown = err.get("input")
    got = "" if isinstance(shown, dict | list) else f" (got {_short(shown)})"
    msg = " ".join(msg.split()) or "is invalid"
    return f"{source}: key '{key}': {msg[0].lower() + msg[1:]}{got}; fix it and run again."


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _too_deep_text(text: str) -> bool:
    """True when the TOML text nests arrays, inline tables or dotted keys deeper than
    MAX_DEPTH. tomllib recurses on brackets and is quadratic in a dotted key's length, so
    a hostile file must be refused before it is parsed. Strings and comments are skipped."""
    depth = dots = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            quote = text[i : i + 3] if text.startswith(c * 3, i) else c
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                if len(quote) == 1 and text[i] == "\n":
                    break  # a one-line string ends at the line's end (tomllib will say so)
                i += 2 if c == '"' and text[i] == "\\" else 1
            i += len(quote) if text.startswith(quote, i) else 0
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end == -1 else end
            continue
        if c in "[{":
            depth += 1
            dots = 0
        elif c in "]}":
            depth = max(depth - 1, 0)
        elif c == ".":
            dots += 1
        elif c in "=,\n":
            dots = 0
        # n dots in a key or header make n + 1 levels
        if depth > MAX_DEPTH or dots >= MAX_DEPTH:
            return True
        i += 1
    return False


def _too_deep(data: object) -> bool:
    stack: list[tuple[object, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return False


def _read_toml(path: Path) -> dict[str, Any]:
    name = path.name
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{name}: is {size} bytes, more than a config file can be "
                f"({MAX_CONFIG_BYTES} bytes); check that --config names the right file."
            )
        with open(path, "rb") as handle:
            text = handle.read(MAX_CONFIG_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot be read ({exc}); check its permissions.") from None
    if _too_deep_text(text):
        raise ConfigError(
            f"{name}: nests tables, arrays or dotted keys more than {MAX_DEPTH} levels deep; "
            "a config needs only a few levels, fix the file."
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: is not valid TOML ({exc}); fix the syntax.") from None
    except RecursionError:
        raise ConfigError(
            f"{name}: nests tables or arrays too deeply; a config needs only a few levels, "
            "fix the file."
        ) from None


def _tool_table(path: Path, data: dict[str, Any]) -> dict[str, Any] | None:
    """`[tool.autoresearch]` of a pyproject.toml, None when it has none."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(
            f"{path.name}: key 'tool' must be a table ([tool.autoresearch]), not "
            f"{'an array of tables' if isinstance(tool, list) else type(tool).__name__}; "
            "fix the file."
        )
    table = tool.get("autoresearch")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path.name}: [tool.autoresearch] must be a table; fix the file.")
    return table


def find_config(root: Path, explicit: Path | None) -> tuple[Path, dict[str, Any]]:
    """Locate and parse the configuration; return its path and the raw table."""
    if explicit is not None:
        path = explicit if explicit.is_absolute() else Path.cwd() / explicit
        if not path.is_file():
            raise ConfigError(f"{explicit}: no such config file; check the --config path.")
        candidates = [path]
    else:
        candidates = [root / CONFIG_FILE, root / "pyproject.toml"]
    for path in candidates:
        if not path.is_file():
            continue
        data = _read_toml(path)
        if path.name == "pyproject.toml":
            table = _tool_table(path, data)
            if table is not None:
                return path, table
            if explicit is None:
                continue
        return path, data
    raise ConfigError(
        f"no {CONFIG_FILE} (or [tool.autoresearch] in pyproject.toml) in {root}; "
        "run `autoresearch init` to write one."
    )


def parse_config(source: str, data: dict[str, Any]) -> CampaignConfig:
    if _too_deep(data):
        raise ConfigError(
            f"{source}: nests tables or arrays more than {MAX_DEPTH} levels deep; a config "
            "needs only a few levels, fix the file."
        )
    if "scope_limits" in data:  # the name `[scope]`'s limits are held under, not a key
        raise ConfigError(
            f"{source}: key 'scope_limits' is not a known setting; write the limits as "
            "[scope] max_file_mb and max_files beside [scope] paths."
        )
    table = data.get("scope")
    if isinstance(table, dict) and "paths" not in table:
        raise ConfigError(
            f"{source}: key 'scope.paths' is missing; add the globs the proposer may change "
            '(paths = ["src/**"]) to the [scope] table.'
        )
    try:
        config = CampaignConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc)) from None
    metric = config.metric
    if metric.command is None and config.judge is None:
        raise ConfigError(
            f"{source}: key 'metric.command' is missing; add the command that prints the "
            "number (or configure a [judge])."
        )
    if metric.command is None:
        if config.metrics or metric.score:
            raise ConfigError(
                f"{source}: key 'metrics': secondary metrics and 'metric.score' are read from "
                "the metric command's output; add 'metric.command' or remove them."
            )
        if metric.direction == "minimize":
            raise ConfigError(
                f"{source}: key 'metric.direction': the judge's score (0-100) is maximized; "
                "remove the key or set it to 'maximize'."
            )
        if metric.file or metric.name or metric.pattern:
            raise ConfigError(
                f"{source}: key 'metric': file, name and pattern read a metric command's "
                "output; with the judge as the metric, remove them."
            )
        return config.model_copy(
            update={"metric": metric.model_copy(update={"direction": "maximize"})}
        )
    if metric.direction is None:
        raise ConfigError(
            f"{source}: key 'metric.direction' is missing; add it ('minimize' or 'maximize')."
        )
    return config


def load_campaign(root: Path, explicit: Path | None = None) -> Campaign:
    path, data = find_config(root, explicit)
    source = path.name if path.parent == root else str(path)
    config = parse_config(source, data)
    if config.instructions is not None:
        instructions = root / config.instructions
        if not instructions.is_file():
            raise ConfigError(
                f"{source}: key 'instructions' names {config.instructions}, which does not "
                "exist; create it or remove the key."
            )
    return Campaign(config=config, root=root, config_path=path)
