"""The commented `autoresearch.toml` that `autoresearch init` writes, fitted to the repository:
its packages become the scope, its benchmark and tests the harness, an installed agent CLI
the proposer."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path, PurePosixPath

from autoresearch.gitcmd import workspace_files

TEMPLATE = """\
# autoresearch campaign: an agent proposes one change at a time, the metric command
# measures it, and the change is kept only if the number really got better.
# Every key is described in the configuration reference (docs/configuration.md).
# The campaign starts from your last commit, but this file is read as it is on disk:
# commit it with the code so that the two stay together.

name = "{name}"                   # branch autoresearch/<name>, folder .autoresearch/<name>/
goal = "describe what should get better"   # handed to the proposer
# instructions = "program.md"       # optional prose for the proposer
scope = {scope}                   # globs the proposer may change, create or delete
harness = {harness}               # globs that must never change (fingerprinted)
# share = ["data"]                  # git-ignored paths linked into the workspace (datasets, caches)

[metric]
command = "{metric}"              # run in the workspace with bash
direction = "minimize"            # or "maximize"
# pattern = 'score: ([-+0-9.eE]+)'  # regex with one group; default: the last number on stdout
timeout = 600                     # seconds
# target = 0                        # stop when reached

{guard}
[stop]
max_iterations = 20               # attempts in total, across resumes
plateau = 0                       # stop after N attempts in a row not kept (0 = off)
max_minutes = 0                   # wall clock of one run (0 = off)
# escalate_after = 4              # attempts without a keep before the strategy rotates
# ablate = true                   # which kept changes carry the gain, at the end

# [decision]                        # when a candidate counts as better
# rule = "auto"                     # from the baseline's 4 runs: identical -> one run per
#                                   #   attempt, equal is not better; they differ -> the
#                                   #   robust sequential rule (noisy metrics: timings)
#                                   # "strict": one run, better than the best;
#                                   # "threshold": better by more than min_delta;
#                                   # "repeats": several runs, mean better by 2 sigma;
#                                   # "sequential": runs until the difference is clear
#                                   #   (for noisy metrics such as timings)
# min_delta = 0                     # the gain to beat: a number, or a percentage like "0.5%"
# repeats = 5                       # runs of each candidate for rule = "repeats"
# max_samples = 8                   # most runs per side for rule = "sequential"
# confidence = 0.95                 # for rule = "sequential"

# [sandbox]                         # limits for the metric and guard commands
# memory_mb = 0                     # address-space limit per command (0 = off)
# cpu_seconds = 0                   # CPU-time limit per command (0 = off)
# network = true                    # false: run without network (needs unshare)
# pass_env = []                     # environment variables with secrets they may see
# watch_checkout = true             # halt if your checkout changes while the proposer runs

[proposer]
{proposer}
"""

GUARD_ON = """\
[guard]                           # must pass for a change to be kept
command = "{command}"
timeout = 600
"""

GUARD_OFF = """\
# [guard]                           # must pass for a change to be kept
# command = "python -m pytest -q"
# timeout = 600
"""

# Agent CLIs, in the order tried; the first one on PATH is the proposer.
AGENTS = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "aider": "python -m pip install aider-install && aider-install",
    "gemini": "npm install -g @google/gemini-cli",
}

SOURCE_SUFFIXES = (".py", ".rs", ".go", ".js", ".ts", ".c", ".cc", ".cpp", ".java", ".jl")
BENCH_PREFIXES = ("bench", "eval", "score", "measure")
NOT_SCOPE = ("setup.py", "conftest.py", "noxfile.py", "manage.py")
TEST_DIRS = ("tests", "test")


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return (slug or "campaign")[:40]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{s}"' for s in items) + "]"


def _files(root: Path) -> list[PurePosixPath]:
    try:
        names = workspace_files(root)
    except OSError:
        names = []
    return [PurePosixPath(n) for n in names if not n.startswith(".")]


def _is_test(path: PurePosixPath) -> bool:
    return path.parts[0] in TEST_DIRS or path.name.startswith("test_")


def _is_bench(path: PurePosixPath) -> bool:
    return path.name.startswith(BENCH_PREFIXES) or path.parts[0] in ("bench", "benchmarks")


def _scope(files: list[PurePosixPath]) -> list[str]:
    """Package folders as globs over their source files (`src/**/*.py`), else the
    top-level modules; never the tests or the benchmark."""
    sources = [f for f in files if f.suffix in SOURCE_SUFFIXES and not _is_test(f)]
    sources = [f for f in sources if not _is_bench(f) and f.name not in NOT_SCOPE]
    suffix = Counter(f.suffix for f in sources).most_common(1)
    ext = suffix[0][0] if suffix else ".py"
    folders = sorted({f.parts[0] for f in sources if len(f.parts) > 1 and f.suffix == ext})
    if "src" in folders:
        folders = ["src"]
    globs = [f"{folder}/**/*{ext}" for folder in folders]
    top = sorted(str(f) for f in sources if len(f.parts) == 1 and f.suffix == ext)
    globs += top[: max(0, 6 - len(globs))]
    return globs or [f"*{ext}"]


def _harness(files: list[PurePosixPath]) -> tuple[list[str], str | None]:
    """The benchmark the metric runs, the tests; and the benchmark's command."""
    benches = sorted(
        str(f) for f in files if f.suffix == ".py" and _is_bench(f) and not _is_test(f)
    )
    bench = next((b for b in benches if "/" not in b), benches[0] if benches else None)
    harness = [bench] if bench else []
    tests = sorted({f.parts[0] for f in files if len(f.parts) > 1 and f.parts[0] in TEST_DIRS})
    harness += [f"{t}/**" for t in tests]
    return harness, (f"python {bench}" if bench else None)


def _proposer() -> str:
    for kind in AGENTS:
        if shutil.which(kind):
            return (
                f'kind = "{kind}"                    # found on PATH; claude, codex, aider, '
                "gemini, openai, optuna or command\n"
                "timeout = 1800                    # seconds per proposal"
            )
    return (
        'kind = "claude"                   # not found on PATH: install it with\n'
        f"#   {AGENTS['claude']}\n"
        "# or choose another kind: codex, aider, gemini, openai, optuna or command\n"
        "timeout = 1800                    # seconds per proposal"
    )


def render_init(root: Path) -> str:
    files = _files(root)
    harness, bench_command = _harness(files)
    has_tests = any(h.split("/")[0] in TEST_DIRS for h in harness)
    guard = GUARD_ON.format(command="python -m pytest -q -x") if has_tests else GUARD_OFF
    return TEMPLATE.format(
        name=_slug(root.name),
        scope=_toml_list(_scope(files)),
        harness=_toml_list(harness),
        metric=bench_command or "python bench.py",
        guard=guard,
        proposer=_proposer(),
    )
