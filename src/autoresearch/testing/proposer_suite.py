"""The checks every proposer kind passes, each run against a stand-in for its tool.

A `Rig` is one proposer of one kind in a fresh repository: the user's checkout, a
worktree the proposer is told to edit, and a tool that can be broken on purpose (a script,
an agent CLI stand-in, a loopback chat server). `KINDS` maps each kind to how its rig is
built; the harness file and the rubric carry marker strings that must never reach a prompt.

The checks include the proposer's declarations (`proposers/base.py`): one that says it runs
no commands starts no process, and one that says it is parallel-safe survives proposals
from several threads at once. A kind of outside code gets the same checks with
`make_rig(..., create=its_factory, tool=its_tool)` and `run_checks(rig)`.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.attempt import Status
from autoresearch.isolation.confinement import confinement_for
from autoresearch.isolation.process import ChildRecord
from autoresearch.learning.prompt import build_prompt
from autoresearch.proposers import REGISTRY
from autoresearch.proposers.base import (
    Outcome,
    Proposal,
    ProposalContext,
    Proposer,
    ProposerSetup,
)
from autoresearch.testing.repo import add_worktree, make_repo, snapshot

HARNESS_MARK = "HARNESS-CONTENT-5e1f"
RUBRIC_MARK = "RUBRIC-CONTENT-a07c"
SCOPE_MARK = "SCOPE-CONTENT-33d9"

FILES = {
    "calc.py": f"# {SCOPE_MARK}\nN = 10\n",
    "bench.py": f"# {HARNESS_MARK}\nimport calc\nprint(abs(calc.N - 3))\n",
    "rubric.md": f"{RUBRIC_MARK}: score the code from 0 to 100\n",
}
# Broad on purpose: the harness and the rubric match the scope, and must still be hidden.
SCOPE = ("*.py", "*.md")
HARNESS = ("bench.py",)
HIDDEN = ("rubric.md",)

# How a tool is broken: non-zero exit, gone mid-run, garbage on stdout, server error 500;
# the tool reports an error its own way (claude's `is_error` with exit 0, codex's
# `turn.failed`, aider's error line on stdout, gemini's JSON error); a NUL byte in the
# description; a 1.5 GB description file.
EXIT, MISSING, GARBAGE, SERVER_ERROR = "exit", "missing", "garbage", "server_error"
TOOL_ERROR, NUL, HUGE = "tool_error", "nul_description", "huge_description"
# After these a proposal is failed; after garbage it only must not raise.
FAILING = (EXIT, MISSING, SERVER_ERROR, TOOL_ERROR)
# The tool's own words, which a failed proposal's reason must carry.
TOOL_MESSAGE = "Overloaded-7c1e"
DESCRIPTION_LIMIT = 200
# Peak memory (bytes) a proposal may take reading a 1.5 GB description file.
READ_BUDGET = 16 * 2**20

EDIT = "sed -i 's/^N = .*/N = 3/' calc.py"
CAPTURE = 'cat "$AUTORESEARCH_PROMPT_FILE" >> "$SEEN"; printf "%s\\n" "$@" >> "$SEEN"'
GARBAGE_SCRIPT = 'head -c 3000 /dev/urandom; printf \'\\n{"type": "result", "usage": 7\'\n'

# Each kind's tool reporting an error its own way (TOOL_ERROR), and a description with a
# NUL byte (NUL), as the tool prints them.
TOOL_ERROR_OUTPUT = {
    "command": f"echo 'Error: {TOOL_MESSAGE}'\nexit 1",
    "claude": f"""cat <<'JSON'
{{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 \
{{\\"type\\":\\"error\\",\\"error\\":{{\\"message\\":\\"{TOOL_MESSAGE}\\"}}}}"}}
JSON""",
    "codex": f"""echo '{{"type":"turn.started"}}'
echo '{{"type":"error","message":"stream disconnected: {TOOL_MESSAGE}"}}'
echo '{{"type":"turn.failed","error":{{"message":"{TOOL_MESSAGE}"}}}}'""",
    "aider": f"""echo "Aider v0.80"
echo "litellm.RateLimitError: AnthropicException - {TOOL_MESSAGE}"
exit 1""",
    "gemini": f"""echo '{{"error":{{"type":"ApiError","message":"{TOOL_MESSAGE}","code":429}}}}' >&2
exit 1""",
}
NUL_OUTPUT = {
    "command": "printf 'set N\\0 to 3\\n' > \"$AUTORESEARCH_DESCRIPTION_FILE\"",
    "claude": """echo '{"type":"result","result":"DESCRIPTION: set N\\u0000 to 3"}'""",
    "codex": """echo '{"type":"item.completed","item":{"type":"agent_message","text":"N\\u0000"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'""",
    "aider": "printf 'set N\\0 to 3\\n'",
    "gemini": """echo '{"response":"set N\\u0000 to 3"}'""",
}
HUGE_OUTPUT = """printf 'set N to 3\\n' > "$AUTORESEARCH_DESCRIPTION_FILE"
truncate -s 1500M "$AUTORESEARCH_DESCRIPTION_FILE"
"""


@dataclass
class Tool:
    """What a proposer kind talks to. `seen` collects every prompt the tool was given."""

    options: dict[str, Any]
    seen: Path | None = None
    breaker: Callable[[str], None] = lambda mode: None
    prompts_of: Callable[[], list[str]] | None = None
    stop: Callable[[], None] = lambda: None
    prompted: bool = True  # False: the kind shows no prompt (it writes through its own code)

    def prompts(self) -> list[str]:
        if self.prompts_of is not None:
            return self.prompts_of()
        if self.seen is None or not self.seen.exists():
            return []
        return [self.seen.read_text(encoding="utf-8", errors="replace")]


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/bash\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def _break_script(path: Path, kind: str) -> Callable[[str], None]:
    def breaker(mode: str) -> None:
        if mode == EXIT:
            _script(path, "echo 'not logged in' >&2\nexit 3")
        elif mode == MISSING:
            path.unlink()
        elif mode == GARBAGE:
            _script(path, GARBAGE_SCRIPT)
        elif mode == TOOL_ERROR:
            _script(path, f"{EDIT}\n{TOOL_ERROR_OUTPUT[kind]}")
        elif mode == NUL:
            _script(path, f"{EDIT}\n{NUL_OUTPUT[kind]}")
        elif mode == HUGE:
            _script(path, f"{EDIT}\n{HUGE_OUTPUT}")
        else:
            raise ValueError(mode)

    return breaker


def _seen(root: Path) -> Path:
    """Where a stand-in tool writes down what it was given: a folder of its own, the only
    place outside its workspace that the sandbox lets it write (`writable`)."""
    folder = root / "capture"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "seen.txt"


# What a command-running kind needs to be told so that its stand-in can write down what it
# was given from inside the sandbox.
def _capture_options(root: Path) -> dict[str, Any]:
    return {"pass_env": ["SEEN"], "writable": [str(_seen(root).parent)]}


def command_tool(root: Path) -> Tool:
    script = _script(root / "propose.sh", f"{CAPTURE}\n{EDIT}\necho 'set N to 3'")
    return Tool(
        options={"command": f"bash {script}", "timeout": 20, **_capture_options(root)},
        seen=_seen(root),
        breaker=_break_script(script, "command"),
    )


STAND_IN_OUTPUT = {
    "claude": """cat <<'JSON'
{"type":"result","result":"DESCRIPTION: set N to 3","total_cost_usd":0.25,
 "usage":{"input_tokens":1000,"output_tokens":50}}
JSON""",
    "codex": """echo '{"type":"item.completed","item":{"type":"agent_message","text":"set N to 3"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":1200,"output_tokens":80}}'""",
    "aider": """echo "set N to 3"
echo "Tokens: 2.5k sent, 310 received. Cost: \\$0.02 message, \\$0.05 session.\"""",
    "gemini": """cat <<'JSON'
{"response":"set N to 3","stats":{"models":{"m":{"tokens":{"prompt":9}}}}}
JSON""",
}


def agent_tool(kind: str) -> Callable[[Path], Tool]:
    """A stand-in executable for an agent CLI: it edits, prints what the tool prints, and
    writes down the prompt file and its arguments."""

    def make(root: Path) -> Tool:
        exe = _script(root / kind, f"{CAPTURE}\n{EDIT}\n{STAND_IN_OUTPUT[kind]}")
        return Tool(
            options={
                "executable": str(exe),
                "timeout": 20,
                "max_turns": 3,
                **_capture_options(root),
            },
            seen=_seen(root),
            breaker=_break_script(exe, kind),
        )

    return make


def edit_block(path: str, search: str, replace: str) -> str:
    return (
        f"DESCRIPTION: edit {path}\n{path}\n"
        f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"
    )


def chat_tool(root: Path) -> Tool:
    from autoresearch.testing.fake_openai import Prepared, serve

    fake, server = serve()
    fake.add(edit_block("calc.py", "N = 10\n", "N = 3\n"))

    def breaker(mode: str) -> None:
        fake.replies.clear()
        if mode == SERVER_ERROR:
            fake.add(Prepared(status=500))
        elif mode == MISSING:
            server.shutdown()
            server.server_close()
        elif mode == GARBAGE:
            fake.add("\x00\x01 calc.py\n<<<<<<< SEARCH\nN = 10\n(no divider, no end)")
        elif mode == NUL:
            fake.add(edit_block("calc.py", "N = 10\n", "N = 3\n").replace("edit", "set\x00", 1))
        else:
            raise ValueError(mode)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return Tool(
        options={"base_url": fake.url, "model": "m", "max_retries": 0, "request_timeout": 10},
        breaker=breaker,
        prompts_of=fake.texts,
        stop=stop,
    )


def optuna_tool(root: Path) -> Tool:
    # No tool to break: the study lives in the state folder and writes through our code.
    return Tool(
        options={"sampler": "random", "seed": 1, "space": {"calc.py:N": {"low": 0, "high": 9}}},
        prompted=False,
    )


@dataclass(frozen=True)
class Kind:
    """How the suite builds the tool of one proposer kind, and the ways it can break."""

    tool: Callable[[Path], Tool]
    failures: tuple[str, ...] = ()


SCRIPT_FAILURES = (EXIT, MISSING, GARBAGE, TOOL_ERROR, NUL)

# The suite runs over every entry; a new proposer kind adds one line here.
KINDS: dict[str, Kind] = {
    "command": Kind(command_tool, (*SCRIPT_FAILURES, HUGE)),
    "optuna": Kind(optuna_tool),
    "openai": Kind(chat_tool, (SERVER_ERROR, MISSING, GARBAGE, NUL)),
    "claude": Kind(agent_tool("claude"), SCRIPT_FAILURES),
    "codex": Kind(agent_tool("codex"), SCRIPT_FAILURES),
    "aider": Kind(agent_tool("aider"), SCRIPT_FAILURES),
    "gemini": Kind(agent_tool("gemini"), SCRIPT_FAILURES),
}


@dataclass
class Rig:
    kind: str
    root: Path
    repo: Path
    workspace: Path
    setup: ProposerSetup
    tool: Tool
    proposer: Proposer
    iteration: int = field(default=0)

    def context(self, workspace: Path | None = None) -> ProposalContext:
        self.iteration += 1
        facts: dict[str, Any] = {
            "iteration": self.iteration,
            "goal": "make the score zero",
            "instructions": "",
            "scope": list(self.setup.scope),
            "harness": list(self.setup.harness),
            "direction": self.setup.direction,
            "metric_command": "python bench.py",
            "baseline": 7.0,
            "best": 7.0,
            "history": [],
        }
        prompt = build_prompt(**facts)
        prompt_file = self.setup.state_dir / "prompts" / f"{self.iteration:04d}.md"
        prompt_file.parent.mkdir(parents=True, exist_ok=True)
        prompt_file.write_text(prompt, encoding="utf-8")
        log_dir = self.setup.state_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SEEN": str(_seen(self.root)),
            "AUTORESEARCH_ITERATION": str(self.iteration),
            "AUTORESEARCH_WORKSPACE": str(workspace or self.workspace),
            "AUTORESEARCH_PROMPT_FILE": str(prompt_file),
        }
        return ProposalContext(
            workspace=workspace or self.workspace,
            prompt=prompt,
            prompt_file=prompt_file,
            log_dir=log_dir,
            env=env,
            **facts,
        )

    def propose(self) -> Proposal:
        return self.proposer.propose(self.context())

    def close(self) -> None:
        self.proposer.close()
        self.tool.stop()


Create = Callable[[dict[str, Any], ProposerSetup], Proposer]


def make_rig(
    kind: str,
    root: Path,
    *,
    create: Create | None = None,
    tool: Callable[[Path], Tool] | None = None,
) -> Rig:
    """A proposer of `kind` in a fresh repository under `root`: built through the registry,
    or, for a kind of outside code, by `create(options, setup)` against `tool(root)`."""
    root.mkdir(parents=True, exist_ok=True)
    repo = make_repo(root / "repo", FILES)
    workspace = add_worktree(repo, root / "worktree", "autoresearch/suite")
    tool_of = tool or KINDS[kind].tool
    made = tool_of(root)
    state_dir = root / "state"
    setup = ProposerSetup(
        name="suite",
        source="autoresearch.toml",
        state_dir=state_dir,
        scope=SCOPE,
        harness=HARNESS,
        hidden=HIDDEN,
        options=made.options,
        environ={},
        child=ChildRecord(state_dir / "child.pgid"),
        # Confined as in a campaign: the user's repository hidden, bubblewrap where it runs.
        confinement=confinement_for(
            "auto", "autoresearch.toml", state_dir=state_dir, root=repo, objects=None
        ),
    )
    if create is not None:
        proposer = create(made.options, setup)
    else:
        registered = REGISTRY[kind]
        proposer = registered.create(registered.options.model_validate(made.options), setup)
    return Rig(kind, root, repo, workspace, setup, made, proposer)


# -- checks -----------------------------------------------------------------------------


def check_edits_land_in_its_workspace(rig: Rig) -> None:
    checkout = snapshot(rig.repo)
    before = {name: (rig.workspace / name).read_bytes() for name in FILES}
    proposal = rig.propose()
    assert not proposal.failed and not proposal.timed_out, proposal.reason
    assert (rig.workspace / "calc.py").read_bytes() != before["calc.py"], "no edit was made"
    for name in ("bench.py", "rubric.md"):
        assert (rig.workspace / name).read_bytes() == before[name], f"{name} was edited"
    assert snapshot(rig.repo) == checkout, "the user's checkout changed"


def check_a_broken_tool_is_a_failed_proposal(rig: Rig, mode: str) -> None:
    import tracemalloc

    checkout = snapshot(rig.repo)
    rig.tool.breaker(mode)
    tracemalloc.start()
    try:
        proposal = rig.propose()  # raising here fails the check
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(proposal, Proposal)
    if mode in FAILING:
        assert proposal.failed or proposal.timed_out, f"{mode}: not marked failed"
        assert proposal.reason, f"{mode}: the failure gives no reason"
    if mode == TOOL_ERROR:
        assert TOOL_MESSAGE in proposal.reason, f"the tool's message is not the reason: {proposal}"
    if mode in (NUL, HUGE):
        assert not proposal.failed and not proposal.timed_out, proposal.reason
        assert proposal.description, f"{mode}: the description was lost"
    for text in (proposal.description, proposal.reason):
        assert "\x00" not in text, "a NUL byte reached the description or reason"
    assert len(proposal.description) <= DESCRIPTION_LIMIT, "the description is not one line"
    assert peak < READ_BUDGET, f"{mode}: the proposal read {peak} bytes into memory"
    assert snapshot(rig.repo) == checkout, "the user's checkout changed"


def check_observe_accepts_every_status(rig: Rig) -> None:
    for status in Status:
        rig.propose()
        metric = 5.0 if status.measured and status not in (Status.CRASH, Status.TIMEOUT) else None
        rig.proposer.observe(Outcome(rig.iteration, status, metric, 7.0, rig.setup.direction))


def check_close_is_idempotent(rig: Rig) -> None:
    rig.proposer.close()
    rig.proposer.close()
    rig.propose()
    rig.proposer.close()
    rig.proposer.close()


def check_prompts_never_show_harness_or_rubric(rig: Rig) -> None:
    rig.propose()
    rig.propose()
    prompts = rig.tool.prompts()
    if rig.tool.prompted:
        assert prompts, "the tool was given no prompt (the capture is broken)"
    for text in prompts:
        assert HARNESS_MARK not in text, "a prompt shows the harness"
        assert RUBRIC_MARK not in text, "a prompt shows the rubric"
        assert "rubric.md" not in text, "a prompt names the rubric"
    if rig.kind == "openai":  # the chat proposer shows the scope's files themselves
        assert any(SCOPE_MARK in text for text in prompts), "the scope files are not shown"


@contextmanager
def counting_spawns() -> Iterator[list[str]]:
    """Every process this interpreter starts while inside, whatever the way (subprocess,
    fork, posix_spawn, system), but the package's own git reading the files."""
    started: list[str] = []
    lock = threading.Lock()
    real_init = subprocess.Popen.__init__
    patched: list[tuple[Any, str, Any]] = []

    def popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        # The package's own git, which reads the files for the proposer's own code, is not
        # a command the proposer runs.
        own_git = isinstance(args, list | tuple) and bool(args) and str(args[0]) == "git"
        if not own_git:
            with lock:
                started.append(f"Popen {args!r}"[:200])
        real_init(self, args, *rest, **kwargs)

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                started.append(f"os.{name}")
            return real(*args, **kwargs)

        return call

    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"):
        real = getattr(os, name, None)
        if real is not None:
            patched.append((os, name, real))
            setattr(os, name, counted(name, real))
    try:
        yield started
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]
        for module, name, real in patched:
            setattr(module, name, real)


def check_declarations_are_a_proposer_s(rig: Rig) -> None:
    """It is a `Proposer` (the declarations are read, never probed), and one that says it
    runs no commands starts no process while it proposes and hears outcomes."""
    proposer = rig.proposer
    assert isinstance(proposer, Proposer), "a proposer kind subclasses proposers.base.Proposer"
    for name in ("runs_commands", "confined", "parallel_safe", "edits_in_place"):
        assert isinstance(getattr(proposer, name), bool), f"{name} is not declared as a bool"
    if proposer.confined:
        assert proposer.runs_commands, "confined says its commands are sealed: it runs some"
    with counting_spawns() as started:
        proposal = rig.propose()
        proposer.observe(Outcome(rig.iteration, Status.DISCARD, 6.0, 7.0, rig.setup.direction))
    assert isinstance(proposal, Proposal)
    if not proposer.runs_commands:
        assert not started, f"declares runs_commands = False but started {started}"


def check_parallel_safe_survives_concurrent_proposals(rig: Rig, threads: int = 4) -> None:
    """A proposer that says `parallel_safe` serves several slots at once: proposals from
    several threads, each in its own workspace, all succeed, and the outcomes are heard."""
    proposer = rig.proposer
    if not proposer.parallel_safe:
        return
    workspaces = [
        add_worktree(rig.repo, rig.root / f"slot-{k}", f"autoresearch/suite-{k}")
        for k in range(threads)
    ]
    contexts = [rig.context(workspace) for workspace in workspaces]
    proposals: list[Proposal | BaseException] = [Proposal() for _ in contexts]
    barrier = threading.Barrier(threads)

    def ask(k: int) -> None:
        barrier.wait()
        try:
            proposals[k] = proposer.propose(contexts[k])
        except BaseException as exc:  # reported below, in the suite's own thread
            proposals[k] = exc

    running = [threading.Thread(target=ask, args=(k,)) for k in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(timeout=120)
    for k, proposal in enumerate(proposals):
        assert isinstance(proposal, Proposal), f"proposal {k} raised {proposal!r}"
        assert not proposal.failed and not proposal.timed_out, proposal.reason
        before = FILES["calc.py"].encode()
        assert (workspaces[k] / "calc.py").read_bytes() != before, f"slot {k}: no edit"
    points = [tuple(sorted(p.params.items())) for p in proposals if isinstance(p, Proposal)]
    if all(points):
        assert len(set(points)) == len(points), f"concurrent proposals repeat a point: {points}"
    for ctx in contexts:
        proposer.observe(Outcome(ctx.iteration, Status.DISCARD, 6.0, 7.0, rig.setup.direction))


def run_checks(rig: Rig) -> None:
    """Every check of the suite on `rig`, in order (each raises AssertionError)."""
    for check in CHECKS.values():
        check(rig)


CHECKS: dict[str, Callable[[Rig], None]] = {
    "declarations_are_a_proposer_s": check_declarations_are_a_proposer_s,
    "parallel_safe_survives_concurrent_proposals": (
        check_parallel_safe_survives_concurrent_proposals
    ),
    "edits_land_in_its_workspace": check_edits_land_in_its_workspace,
    "observe_accepts_every_status": check_observe_accepts_every_status,
    "close_is_idempotent": check_close_is_idempotent,
    "prompts_never_show_harness_or_rubric": check_prompts_never_show_harness_or_rubric,
}


def failure_cases() -> list[tuple[str, str]]:
    """Every (kind, way its tool breaks) pair."""
    return [(kind, mode) for kind, entry in KINDS.items() for mode in entry.failures]
