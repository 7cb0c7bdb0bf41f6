"""`autoresearch import`: a campaign config from the program files people already have.

    import program.md   a karpathy-style program (the file to edit, the run command, the
                        metric line to grep, the time budget) or a seed-style program
                        (## Goal / ## Metric / ## Guard / ## Config sections)
    import pi           a pi-autoresearch session (autoresearch.md, autoresearch.sh,
                        autoresearch.checks.sh, autoresearch.jsonl): the config, and the
                        session's history as imported prior attempts

Every value written says where it came from; what could not be inferred is said too, and
left for the user. The imported history is self-reported (numbers the agent measured
itself): it is kept apart from the ledger (`imported.jsonl`), marked so, and no decision,
summary or stop rule of the engine reads it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autoresearch.config import CONFIG_FILE, NAME_RE, parse_config
from autoresearch.errors import ConfigError
from autoresearch.store.ledger import write_atomic

IMPORTED = "imported.jsonl"
SEED_MAX_ITERATIONS = 50  # the seed-style program's own cap


@dataclass
class Inferred:
    """The config a program file gives, and what was and was not found in it."""

    style: str
    name: str
    goal: str = ""
    scope: list[str] = field(default_factory=list)
    harness: list[str] = field(default_factory=list)
    metric: dict[str, Any] = field(default_factory=dict)
    guard: dict[str, Any] = field(default_factory=dict)
    stop: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] = field(default_factory=dict)
    sandbox: dict[str, Any] = field(default_factory=dict)
    found: list[str] = field(default_factory=list)  # "key = value  (from ...)"
    missing: list[str] = field(default_factory=list)  # what the user must decide

    def note(self, key: str, value: Any, source: str) -> None:
        self.found.append(f"{key} = {_toml(value)}  ({source})")


@dataclass
class ImportResult:
    style: str
    config: Path
    found: list[str]
    missing: list[str]
    imported: int = 0
    imported_path: Path | None = None
    written: bool = True  # False: an existing config was kept

    def to_json(self) -> dict[str, Any]:
        return {
            "style": self.style,
            "config": str(self.config),
            "inferred": self.found,
            "could_not": self.missing,
            "imported_attempts": self.imported,
            "imported_path": str(self.imported_path) if self.imported_path else None,
            "written": self.written,
        }


# -- writing the config -----------------------------------------------------------------


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def render(inferred: Inferred, source: str) -> str:
    lines = [
        f"# Written by `autoresearch import` from {source} ({inferred.style}).",
        "# Check every value, then `autoresearch check`; see docs/configuration.md for all keys.",
    ]
    if inferred.missing:
        lines.append("# Could not be inferred, decide yourself:")
        lines += [f"#   - {m}" for m in inferred.missing]
    lines += [
        "",
        f"name = {_toml(inferred.name)}",
        f"goal = {_toml(inferred.goal)}",
        f"scope = {_toml(inferred.scope)}",
        f"harness = {_toml(inferred.harness)}",
    ]
    for table in ("metric", "guard", "stop", "decision", "sandbox"):
        values = getattr(inferred, table)
        if values:
            lines += ["", f"[{table}]"] + [f"{k} = {_toml(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def write_config(root: Path, inferred: Inferred, source: str, force: bool) -> Path:
    target = root / CONFIG_FILE
    if target.exists() and not force:
        raise ConfigError(
            f"{CONFIG_FILE} already exists; pass --force to replace it with the imported one."
        )
    text = render(inferred, source)
    if inferred.scope:
        import tomllib

        try:
            parse_config(CONFIG_FILE, tomllib.loads(text))
        except ConfigError as exc:
            inferred.missing.append(f"the written config does not validate yet: {exc}")
            text = render(inferred, source)
    else:
        inferred.missing.append(
            "scope: which files may change (autoresearch.toml cannot be used until it is set)"
        )
        text = render(inferred, source)
    target.write_text(text, encoding="utf-8")
    return target


# -- reading program files --------------------------------------------------------------


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; give the path of the program file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc}).") from None


def _slug(text: str, fallback: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip().lower()).strip("-.")[:64]
    return slug if slug and NAME_RE.fullmatch(slug) else fallback


def _fallback_name(root: Path) -> str:
    return _slug(root.name, "campaign")


def _title(text: str) -> str:
    match = re.search(r"^#\s+(?:Program:|Campaign:)?\s*(.+?)\s*$", text, re.MULTILINE)
    return match.group(1) if match else ""


def _sections(text: str) -> dict[str, str]:
    """`## Heading` -> its body, headings lower-cased."""
    parts = re.split(r"^##\s+(.+?)\s*$", text, flags=re.MULTILINE)
    return {parts[i].strip().lower(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def is_seed_style(text: str) -> bool:
    sections = _sections(text)
    return "metric" in sections and ("goal" in sections or "config" in sections)


def import_program(root: Path, path: Path, force: bool = False) -> ImportResult:
    text = _read(path)
    source = _display(root, path)
    inferred = _seed(root, text, source) if is_seed_style(text) else _karpathy(root, text, source)
    config = write_config(root, inferred, source, force)
    return ImportResult(inferred.style, config, inferred.found, inferred.missing)


def _display(root: Path, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _existing_files(root: Path, text: str) -> list[str]:
    """Paths in `text` (a command) that name files of the repository."""
    found = []
    for token in re.findall(r"[\w./-]+\.[A-Za-z0-9]+", text):
        token = token.strip("./") if token.startswith("./") else token
        if (root / token).is_file() and token not in found:
            found.append(token)
    return found


_CMD = re.compile(
    r"`((?:uv run|python3?|bash|sh|make|npm run|pnpm|yarn|cargo|go run|node|pytest)\b[^`]*)`"
)
_LOWER = re.compile(
    r"\b(lowest|lower is better|minimi[sz]e|reduce|decrease|fastest|smallest)\b", re.I
)
_HIGHER = re.compile(r"\b(highest|higher is better|maximi[sz]e|increase|largest)\b", re.I)


def _karpathy(root: Path, text: str, source: str) -> Inferred:
    inferred = Inferred("karpathy-style program", _slug(_title(text), _fallback_name(root)))
    inferred.note("name", inferred.name, "the title" if _title(text) else "the folder")
    mode = None
    for line in text.splitlines():
        lowered = line.lower()
        if "cannot" in lowered or "can't" in lowered or "must not" in lowered:
            mode = "harness"
        elif re.search(r"\bcan do\b|\bcan\b.*:\**\s*$", lowered):
            mode = "scope"
        elif line.startswith("#"):
            mode = None
        paths = [p for p in re.findall(r"`([\w./-]+\.[A-Za-z0-9]+)`", line) if "/" in p or "." in p]
        if not paths:
            continue
        says_edit = re.search(
            r"file you (modify|edit)|only file you|you (may|can) (edit|modify)", lowered
        )
        says_fixed = re.search(
            r"do not modify|don't modify|read-only|never modify|not modify", lowered
        )
        for p in paths:
            if not (root / p).exists():
                continue
            if says_fixed or (mode == "harness" and "modify" in lowered):
                if p not in inferred.harness:
                    inferred.harness.append(p)
            elif (says_edit or (mode == "scope" and "modify" in lowered)) and (
                p not in inferred.scope
            ):
                inferred.scope.append(p)
    inferred.harness = [p for p in inferred.harness if p not in inferred.scope]
    if inferred.scope:
        inferred.note("scope", inferred.scope, "the file the program says to modify")
    if inferred.harness:
        inferred.note("harness", inferred.harness, "the files the program says not to modify")
    goal = re.search(r"goal is[^:]*:\s*(.+?)(?:\*\*|$)", text, re.MULTILINE | re.I)
    if goal:
        inferred.goal = goal.group(1).strip().rstrip("*").strip()
        inferred.note("goal", inferred.goal, "the goal sentence")
    commands = [c for c in _CMD.findall(text) if "grep" not in c and "tail" not in c]
    run = None
    for command in commands:
        cleaned = re.split(r"\s*(?:>|2>|\|)", command)[0].strip()
        if any(s in cleaned for s in inferred.scope) or run is None:
            run = cleaned
            if any(s in cleaned for s in inferred.scope):
                break
    grep = re.search(r"grep\s+[\"']\^?([A-Za-z_][\w.]*):", text)
    name = grep.group(1) if grep else None
    if run:
        inferred.metric["command"] = run
        inferred.note("metric.command", run, "the command the program runs")
    else:
        inferred.missing.append("metric.command: the command that runs the experiment")
    if name:
        pattern = rf"^{re.escape(name)}:\s*([-+0-9.eE]+)"
        inferred.metric["pattern"] = pattern
        inferred.note("metric.pattern", pattern, f"the grep for {name}:")
    else:
        inferred.missing.append("metric.pattern: which output line holds the number")
    direction = _direction_near(text, name)
    if direction:
        inferred.metric["direction"] = direction
        inferred.note("metric.direction", direction, "lowest/highest in the goal")
    else:
        inferred.missing.append("metric.direction: 'minimize' or 'maximize'")
    kill = re.search(r"exceeds?\s+(\d+(?:\.\d+)?)\s*min", text, re.I)
    budget = re.search(r"time budget of\s+(\d+(?:\.\d+)?)\s*min", text, re.I)
    if kill:
        inferred.metric["timeout"] = float(kill.group(1)) * 60
        inferred.note("metric.timeout", float(kill.group(1)) * 60, "the kill-after limit")
    elif budget:
        seconds = 2 * float(budget.group(1)) * 60
        inferred.metric["timeout"] = seconds
        inferred.note("metric.timeout", seconds, "twice the time budget")
    if budget:
        inferred.found.append(
            f"(the {budget.group(1)}-minute training budget stays in the script; the engine "
            "does not enforce it)"
        )
    if re.search(r"val_pass|both .* improved and", text, re.I):
        inferred.missing.append(
            "guard: the program keeps a change only when another condition holds too "
            "(e.g. val_pass); write it as [guard] command"
        )
    if re.search(r"loop forever|never stop", text, re.I):
        inferred.missing.append(
            "stop.max_iterations: the program loops forever; the default (20) applies"
        )
    return inferred


def _direction_near(text: str, name: str | None) -> str | None:
    goal = re.search(r"goal is[^\n]*", text, re.I)
    candidates = [goal.group(0)] if goal else []
    if name:
        candidates += [ln for ln in text.splitlines() if name in ln]
    candidates.append(text)
    for chunk in candidates:
        low, high = _LOWER.search(chunk), _HIGHER.search(chunk)
        if low and not high:
            return "minimize"
        if high and not low:
            return "maximize"
        if low and high:
            return "minimize" if low.start() < high.start() else "maximize"
    return None


_KEY = re.compile(r"^\s*[-*]?\s*\**`?([A-Za-z_][\w-]*)`?\**\s*[:=]\s*(.*?)\s*$")


def _values(body: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in body.splitlines():
        match = _KEY.match(line)
        if match:
            out.setdefault(match.group(1).lower(), _unquote(match.group(2)))
    return out


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "`\"'":
        value = value[1:-1]
    return value.strip().strip("`").strip()


def _fenced(body: str) -> str | None:
    match = re.search(r"```[\w-]*\n(.+?)\n```", body, re.S)
    if not match:
        return None
    lines = [ln for ln in match.group(1).splitlines() if ln.strip() and not ln.startswith("#")]
    return " && ".join(lines) if lines else None


def _list(value: str, body: str, key: str) -> list[str]:
    value = value.strip()
    if value.startswith("["):
        try:
            parsed = json.loads(value.replace("'", '"'))
            return [str(i) for i in parsed]
        except json.JSONDecodeError:
            value = value.strip("[]")
    if value:
        return [_unquote(v) for v in value.split(",") if _unquote(v)]
    # A bullet list under the key's line.
    lines = body.splitlines()
    items: list[str] = []
    for i, line in enumerate(lines):
        if re.match(rf"^\s*[-*]?\s*\**`?{key}`?\**\s*[:=]\s*$", line, re.I):
            for nxt in lines[i + 1 :]:
                bullet = re.match(r"^\s+[-*]\s+(.+)$", nxt)
                if not bullet:
                    break
                items.append(_unquote(bullet.group(1)))
    return items


def _seed(root: Path, text: str, source: str) -> Inferred:
    sections = _sections(text)
    title = _title(text)
    inferred = Inferred("Goal/Metric/Guard/Config program", _slug(title, _fallback_name(root)))
    inferred.note("name", inferred.name, "the title" if title else "the folder")
    goal = " ".join(sections.get("goal", "").split())
    if goal:
        inferred.goal = goal
        inferred.note("goal", goal if len(goal) < 60 else goal[:57] + "...", "## Goal")
    else:
        inferred.missing.append("goal: the program has no ## Goal")
    metric_body = sections.get("metric", "")
    metric = _values(metric_body)
    command = metric.get("command") or _fenced(metric_body)
    if command:
        inferred.metric["command"] = command
        inferred.note("metric.command", command, "## Metric")
    else:
        inferred.missing.append("metric.command: ## Metric names no command")
    direction = metric.get("direction", "").lower()
    if direction in ("higher", "maximize", "max"):
        inferred.metric["direction"] = "maximize"
        inferred.note("metric.direction", "maximize", "## Metric direction: higher")
    elif direction in ("lower", "minimize", "min"):
        inferred.metric["direction"] = "minimize"
        inferred.note("metric.direction", "minimize", "## Metric direction: lower")
    else:
        inferred.metric["direction"] = "maximize"
        inferred.note(
            "metric.direction", "maximize", "no direction given: the program's default, higher"
        )
    target = metric.get("target")
    if target:
        number = _number(target)
        if number is None:
            inferred.missing.append(f"metric.target: {target!r} is not a number")
        else:
            inferred.metric["target"] = number
            inferred.note("metric.target", number, "## Metric target")
    guard = _values(sections.get("guard", ""))
    guard_command = guard.get("command") or _fenced(sections.get("guard", ""))
    if guard_command:
        inferred.guard["command"] = guard_command
        inferred.note("guard.command", guard_command, "## Guard")
    harness = _existing_files(root, f"{command or ''} {guard_command or ''}")
    config_body = sections.get("config", "")
    config = _values(config_body)
    scope = _list(config.get("scope_files", ""), config_body, "scope_files")
    scope = [s for s in scope if s not in harness]
    if scope:
        inferred.scope = scope
        inferred.note("scope", scope, "## Config scope_files")
    if harness:
        inferred.harness = harness
        inferred.note("harness", harness, "the files the metric and guard commands name")
    if "max_iterations" in config:
        cap = _number(config["max_iterations"])
        if cap is None or cap < 0 or cap != int(cap):
            inferred.missing.append(
                f"stop.max_iterations: {config['max_iterations']!r} is not a count"
            )
        else:
            value = min(int(cap), SEED_MAX_ITERATIONS)
            inferred.stop["max_iterations"] = value
            clamp = " (clamped to the program's cap of 50)" if cap > SEED_MAX_ITERATIONS else ""
            inferred.note("stop.max_iterations", value, f"## Config max_iterations{clamp}")
    repeats = _number(config.get("metric_repeats", "")) if "metric_repeats" in config else None
    if repeats is not None and repeats == int(repeats) and 2 <= repeats <= 10:
        inferred.decision["rule"] = "repeats"
        inferred.decision["repeats"] = int(repeats)
        inferred.note("decision.rule", "repeats", f"## Config metric_repeats {int(repeats)}")
    elif "metric_repeats" in config and repeats != 1:
        inferred.missing.append(
            f"decision: metric_repeats {config['metric_repeats']!r} is not 1-10; one sample "
            "per side (rule strict) applies"
        )
    if "min_delta_pct" in config:
        pct = _number(config["min_delta_pct"])
        if pct is None or pct < 0:
            inferred.missing.append(f"decision.min_delta: {config['min_delta_pct']!r} is not >= 0")
        else:
            inferred.decision["min_delta"] = f"{pct:g}%"
            if "rule" not in inferred.decision:
                inferred.decision["rule"] = "threshold"
            inferred.note("decision.min_delta", f"{pct:g}%", "## Config min_delta_pct")
    network = config.get("sandbox_network", "").lower()
    if network in ("none", "bridge"):
        inferred.sandbox["network"] = network == "bridge"
        inferred.note(
            "sandbox.network", network == "bridge", f"## Config sandbox_network {network}"
        )
    for key in ("agent_strategy", "compute", "colab_hw"):
        if key in config:
            inferred.missing.append(
                f"{key} = {config[key]!r}: no equivalent; choose a [proposer] kind, or drive "
                "the campaign yourself with `autoresearch start` / `step`"
            )
    known = {"max_iterations", "metric_repeats", "min_delta_pct", "sandbox_network", "scope_files"}
    for key in sorted(set(config) - known - {"agent_strategy", "compute", "colab_hw"}):
        inferred.missing.append(f"{key}: not a setting this import knows; ignored")
    return inferred


def _number(text: object) -> float | None:
    try:
        value = float(str(text).strip().rstrip("%"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# -- pi-autoresearch sessions -----------------------------------------------------------


def import_pi(root: Path, force: bool = False, folder: Path | None = None) -> ImportResult:
    """A pi-autoresearch session in `folder` (default: the repository): its config, and its
    history as imported prior attempts."""
    base = folder or root
    jsonl = base / "autoresearch.jsonl"
    notes = base / "autoresearch.md"
    if not jsonl.is_file() and not notes.is_file():
        raise ConfigError(
            f"no pi-autoresearch session in {base} (neither autoresearch.jsonl nor "
            "autoresearch.md); run the import where the session's files are."
        )
    configs, runs = read_pi_log(jsonl) if jsonl.is_file() else ([], [])
    current = configs[-1] if configs else {}
    text = notes.read_text(encoding="utf-8", errors="replace") if notes.is_file() else ""
    title = str(current.get("name") or _title(text))
    inferred = Inferred("pi-autoresearch session", _slug(title, _fallback_name(root)))
    inferred.note("name", inferred.name, "the session's name" if title else "the folder")
    objective = _pi_section(text, "objective")
    if objective:
        inferred.goal = " ".join(objective.split())
        inferred.note("goal", inferred.goal[:57], "autoresearch.md ## Objective")
    rel = _display(root, base)
    prefix = "" if rel in (".", "") else rel.rstrip("/") + "/"
    script = base / "autoresearch.sh"
    if script.is_file():
        inferred.metric["command"] = f"bash {prefix}autoresearch.sh"
        inferred.harness.append(f"{prefix}autoresearch.sh")
        inferred.note("metric.command", inferred.metric["command"], "autoresearch.sh")
    else:
        inferred.missing.append("metric.command: the session has no autoresearch.sh")
    name = str(current.get("metricName") or "")
    if name and name != "metric" and re.fullmatch(r"[\w.\-/]+", name):
        inferred.metric["name"] = name
        inferred.note("metric.name", name, "the session's METRIC name")
    elif script.is_file():
        inferred.missing.append("metric.name: which METRIC line is the primary metric")
    direction = {"lower": "minimize", "higher": "maximize"}.get(str(current.get("bestDirection")))
    if direction:
        inferred.metric["direction"] = direction
        inferred.note("metric.direction", direction, "the session's bestDirection")
    else:
        inferred.missing.append("metric.direction: the session does not say")
    checks = base / "autoresearch.checks.sh"
    if checks.is_file():
        inferred.guard["command"] = f"bash {prefix}autoresearch.checks.sh"
        inferred.harness.append(f"{prefix}autoresearch.checks.sh")
        inferred.note("guard.command", inferred.guard["command"], "autoresearch.checks.sh")
    scope = [
        p
        for p in re.findall(r"`([^`\s]+)`", _pi_section(text, "files in scope"))
        if (root / prefix / p).exists() or (root / p).exists()
    ]
    if scope:
        inferred.scope = scope
        inferred.note("scope", scope, "autoresearch.md ## Files in Scope")
    existing = root / CONFIG_FILE
    kept = existing.exists() and not force
    if kept:
        # The history goes to the campaign that is configured already; its config stays.
        from autoresearch.config import load_campaign

        inferred.name = load_campaign(root).name
        inferred.found = [f"kept the existing {CONFIG_FILE} (--force replaces it)"]
        inferred.missing = []
        config = existing
    else:
        config = write_config(root, inferred, f"{prefix}autoresearch.md", force)
    result = ImportResult(inferred.style, config, inferred.found, inferred.missing)
    result.written = not kept
    if runs:
        state_dir = root / ".autoresearch" / inferred.name
        result.imported_path = write_imported(state_dir, runs, configs, jsonl)
        result.imported = len(runs)
    return result


def _pi_section(text: str, name: str) -> str:
    for heading, body in _sections(text).items():
        if heading.startswith(name):
            return body
    return ""


def read_pi_log(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The config headers and the run entries of a pi-autoresearch log; hook entries and
    lines that are not JSON objects are skipped (named in a ConfigError only when no run
    can be read at all)."""
    configs: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    bad = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if not isinstance(entry, dict):
            bad += 1
        elif entry.get("type") == "config":
            configs.append(entry)
        elif "type" not in entry and "status" in entry:
            runs.append(entry)
    if bad and not runs and not configs:
        raise ConfigError(f"{path}: no line is a pi-autoresearch record; is it the session log?")
    return configs, runs


def write_imported(
    state_dir: Path, runs: list[dict[str, Any]], configs: list[dict[str, Any]], source: Path
) -> Path:
    """The session's runs as imported prior attempts, marked self-reported, in
    `imported.jsonl` beside the ledger (replaced whole: importing again is idempotent)."""
    segment_config: dict[int, dict[str, Any]] = dict(enumerate(configs))
    lines = []
    for number, run in enumerate(runs, 1):
        config = segment_config.get(int(run.get("segment") or 0), configs[-1] if configs else {})
        metric = _number(run.get("metric")) if run.get("metric") is not None else None
        stamp = run.get("timestamp")
        utc = None
        if isinstance(stamp, int | float) and math.isfinite(stamp):
            utc = datetime.fromtimestamp(stamp / 1000, UTC).isoformat(timespec="seconds")
        lines.append(
            json.dumps(
                {
                    "imported": number,
                    "source": "pi-autoresearch",
                    "self_reported": True,
                    "run": run.get("run"),
                    "status": str(run.get("status")),
                    "metric": metric,
                    "metric_name": config.get("metricName"),
                    "direction": config.get("bestDirection"),
                    "segment": run.get("segment"),
                    "commit": run.get("commit"),
                    "description": str(run.get("description") or ""),
                    "utc": utc,
                },
                ensure_ascii=False,
            )
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    base = state_dir.parent
    if not (base / ".gitignore").exists():
        (base / ".gitignore").write_text("*\n")
    target = state_dir / IMPORTED
    write_atomic(target, "".join(line + "\n" for line in lines))
    return target


def read_imported(state_dir: Path) -> list[dict[str, Any]]:
    path = state_dir / IMPORTED
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out
