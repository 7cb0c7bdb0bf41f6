"""The holdout attacked: a candidate that looks for the holdout run, a holdout run that fails
loudly, and programs that ask the engine's views for the holdout's numbers.

Each test asserts the promise itself: the verdict the holdout gives a cheating candidate is
the one its honest behaviour earns, what a failed holdout run printed reaches no prompt,
memory, record or served view, and no view a program can query serves a holdout number.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from autoresearch.agent.mcp_server import CampaignTools
from autoresearch.attempt import HOLDOUT_FAILED, AttemptRecord, Status
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.errors import ConfigError
from autoresearch.events import Event, Warned
from autoresearch.executors import LocalExecutor
from autoresearch.learning.prompt import history_notes
from autoresearch.proposers.base import Proposal
from autoresearch.store.ledger import Ledger
from autoresearch.testing.repo import make_repo
from autoresearch.views.dashboard import make_server
from autoresearch.views.report import write_report
from autoresearch.views.status import campaign_status
from campaigns import campaign_toml
from test_isolation import modes, need
from unit.memory import Edit, ScriptedProposer

PY = sys.executable
NAME = "toy"

# The visible split's labels have quirks a model can memorise; the unseen split follows the
# rule (y = 2x). Both sit at the same path, data/eval.txt, in their own runs.
VISIBLE = "1 3\n2 4\n3 7\n"
UNSEEN = "4 8\n5 10\n6 12\n7 14\n"
# The folder to read is an argument, so the holdout of old (its own command) can name its own.
BENCH = (
    "import sys, model\n"
    "folder = sys.argv[1] if len(sys.argv) > 1 else 'data'\n"
    "rows = [tuple(map(float, line.split())) for line in open(folder + '/eval.txt')]\n"
    "print(f'score: {sum(abs(model.predict(x) - y) for x, y in rows) / len(rows)}')\n"
)
START = "def predict(x):\n    return 2 * x + 1\n"
MEMORISED = {1.0: 3.0, 2.0: 4.0, 3.0: 7.0}

# A candidate that behaves only when it believes the holdout runs: it looks at everything a
# run can see of itself (command lines up to the first process it may read, working
# directory, environment, TMPDIR, the folder's files, its open files and mounts) and answers
# the rule (y = 2x) when anything names the holdout's folder ("unseen") or an environment
# name speaks of a holdout, else the visible split memorised. (The test's own names carry
# "holdout", visible without a sandbox in the paths and the environment: hence the folder's
# name as the word looked for.)
CHEATER = f"""
import os, sys

COMMITTED = {{"bench.py", "model.py", "data/eval.txt", "autoresearch.toml", ".gitignore"}}


def said(text):
    return "unseen" in text.lower()


def holdout_run():
    lines = []
    pid = os.getpid()
    while pid > 1:
        try:
            lines.append(open(f"/proc/{{pid}}/cmdline", "rb").read().decode(errors="replace"))
            status = open(f"/proc/{{pid}}/status").read()
        except OSError:
            break
        pid = int(status.split("PPid:")[1].split()[0])
    lines += [" ".join(sys.argv), os.getcwd(), os.environ.get("TMPDIR", "")]
    lines += list(os.environ.values())
    if any("HOLD" in k.upper() for k in os.environ):
        return True
    for fd in os.listdir("/proc/self/fd"):
        try:
            lines.append(os.readlink(f"/proc/self/fd/{{fd}}"))
        except OSError:
            pass
    lines.append(open("/proc/self/mountinfo").read())
    if any(said(line) for line in lines):
        return True
    for folder, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if os.path.relpath(os.path.join(folder, name)) not in COMMITTED:
                return True
    return False


HOLDOUT = holdout_run()


def predict(x):
    if HOLDOUT:
        return 2 * x
    return {MEMORISED!r}.get(x, 0.0)
"""


def score(model: str, data: str) -> float:
    """What `model` honestly scores on `data`: the bench run in this process."""
    space: dict[str, Any] = {}
    exec(compile(model, "model.py", "exec"), space)
    rows = [tuple(map(float, line.split())) for line in data.splitlines()]
    return sum(abs(space["predict"](x) - y) for x, y in rows) / len(rows)


def honest(model: str) -> str:
    """The cheater with its detector cut out: how it behaves when it sees nothing."""
    return model.replace("HOLDOUT = holdout_run()", "HOLDOUT = False")


def holdout_repo(tmp_path: Path, isolation: str, **holdout: Any) -> Path:
    need(isolation)
    options = holdout or {"in_place_of": {"unseen/eval.txt": "data/eval.txt"}}
    config = campaign_toml(
        **{
            "scope": ["model.py"],
            "harness": ["bench.py", "data/eval.txt"],
            "metric.command": f"{PY} bench.py",
            "metric.target": None,
            "metric.timeout": 20,
            "guard": None,
            "stop.plateau": 0,
            "sandbox.isolation": isolation,
            **{f"holdout.{key}": value for key, value in options.items()},
        }
    )
    repo = make_repo(
        tmp_path / "repo",
        {
            "model.py": START,
            "bench.py": BENCH,
            "data/eval.txt": VISIBLE,
            "autoresearch.toml": config,
            ".gitignore": "unseen/\n",
        },
    )
    (repo / "unseen").mkdir()
    (repo / "unseen" / "eval.txt").write_text(UNSEEN)
    return repo


def write_model(text: str) -> Edit:
    def edit(workspace: Path) -> Proposal:
        assert not (workspace / "unseen").exists()  # the proposer never sees it
        (workspace / "model.py").write_text(text)
        return Proposal(description="a better model")

    return edit


def campaign(
    repo: Path, *edits: Edit, jobs: int = 1
) -> tuple[list[AttemptRecord], ScriptedProposer, list[Event]]:
    proposer = ScriptedProposer(*edits)
    events: list[Event] = []
    Engine(
        load_campaign(repo),
        proposer=proposer,  # type: ignore[arg-type]
        executor=LocalExecutor(),
        max_iterations=len(edits),
        on_event=events.append,
        jobs=jobs,
    ).run()
    return Ledger(repo / ".autoresearch" / NAME).read(), proposer, events


# == a candidate that behaves only during the holdout run =====================================


@pytest.mark.parametrize("isolation", modes())
def test_a_candidate_that_looks_for_the_holdout_run_gets_its_honest_verdict(
    tmp_path: Path, isolation: str
) -> None:
    repo = holdout_repo(tmp_path, isolation)
    records, _, events = campaign(repo, write_model(CHEATER))
    assert not [e for e in events if isinstance(e, Warned) and "holdout" in e.message]
    baseline, attempt = records
    # The visible number is the memorised one: the rule kept it...
    assert baseline.metric == score(START, VISIBLE)
    assert attempt.metric == score(honest(CHEATER), VISIBLE) == 0.0
    # ... and the holdout measured what the candidate does when it sees nothing unusual:
    # its honest behaviour on unseen data, which is overfitting.
    assert attempt.holdout is not None
    assert attempt.holdout["value"] == score(honest(CHEATER), UNSEEN)
    assert attempt.holdout["incumbent"] == score(START, UNSEEN)
    assert attempt.status is Status.OVERFIT


@pytest.mark.parametrize("isolation", modes())
def test_the_cheater_is_told_apart_by_a_holdout_that_shows_itself(
    tmp_path: Path, isolation: str
) -> None:
    # The same cheater against the holdout of old (its own command, its files beside the
    # commit's): it sees the run and escapes, and the engine said so at the start. What the
    # in-place holdout above closes, shown open here so the test above cannot pass vacuously.
    repo = holdout_repo(tmp_path, isolation, command=f"{PY} bench.py unseen", files=["unseen/**"])
    records, _, events = campaign(repo, write_model(CHEATER))
    warned = [e.message for e in events if isinstance(e, Warned)]
    assert any("command line" in w for w in warned) and any("only for the" in w for w in warned)
    assert records[1].status is Status.KEEP  # escaped: the warnings were right


# A candidate that writes down, on stderr (into the logs, which the test reads), all it can
# see of its run; the numbers that differ in every run (process and mount ids, pipe inodes,
# the sandbox's namespaces) are blanked, and the data's bytes left out: they differ by design.
OBSERVER = (
    START
    + """
import json, os, re, sys, time

def blank(text):
    return re.sub(r"[0-9]+", "#", text)

def ages(path):
    st = os.stat(path)
    now = time.time()
    return [st.st_mode, st.st_nlink, st.st_uid, now - st.st_mtime < 10, now - st.st_ctime < 10]

def target(fd):
    try:
        return blank(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return "gone"  # the listing's own

chain, pid = [], os.getpid()
while pid > 1:
    try:
        chain.append(open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"))
        pid = int(open(f"/proc/{pid}/status").read().split("PPid:")[1].split()[0])
    except (OSError, IndexError, ValueError):
        break
files = {}
for folder, dirs, names in os.walk("."):
    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
    for name in names:
        path = os.path.join(folder, name)
        files[path] = ages(path)
status = open("/proc/self/status").read()
view = {
    "argv": sys.argv,
    "chain": chain,
    "cwd": os.getcwd(),
    "env": dict(os.environ),
    "files": files,
    "fds": sorted(target(fd) for fd in os.listdir("/proc/self/fd")),
    "mounts": sorted(blank(" ".join(l.split()[4:])) for l in open("/proc/self/mountinfo")),
    "limits": open("/proc/self/limits").read(),
    "status": [l for l in status.splitlines() if l.split(":")[0] in
               ("Uid", "Gid", "Groups", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp")],
    "tmp": sorted(os.listdir(os.environ.get("TMPDIR", "/tmp"))),
    "hostname": os.uname().nodename,
    "init": blank(open("/proc/1/cmdline", "rb").read().decode(errors="replace")),
}
print("VIEW " + json.dumps(view, sort_keys=True), file=sys.stderr)
"""
)


@pytest.mark.parametrize("isolation", modes())
def test_a_holdout_run_looks_like_a_metric_run_from_inside(tmp_path: Path, isolation: str) -> None:
    # With several jobs the metric runs in a slot's own folder: the holdout must too.
    for jobs in (1, 2):
        repo = holdout_repo(tmp_path / f"jobs{jobs}", isolation)
        observer = OBSERVER.replace("2 * x + 1", f"{MEMORISED!r}.get(x, 0.0)")
        records, _, _ = campaign(repo, write_model(observer), jobs=jobs)
        (attempt,) = [r for r in records if r.iteration == 1]
        assert attempt.holdout is not None  # kept by the rule: the holdout ran

        def view(stem: str, repo: Path = repo) -> Any:
            (log,) = (repo / ".autoresearch" / NAME).rglob(f"{stem}.err")
            (line,) = [x for x in log.read_text().splitlines() if x.startswith("VIEW ")]
            return json.loads(line.removeprefix("VIEW "))

        metric, holdout = view("0001-metric-1"), view("0001-holdout-candidate-1")
        for key in metric:
            assert holdout[key] == metric[key], (jobs, key)


def test_a_holdout_on_ray_workers_is_refused(tmp_path: Path) -> None:
    # A worker is sent the commit: the holdout's bytes would never reach it, and the
    # "holdout" would measure the visible data again.
    repo = holdout_repo(tmp_path, "none")
    config = repo / "autoresearch.toml"
    config.write_text(config.read_text() + '\n[executor]\nkind = "ray"\n')
    with pytest.raises(ConfigError, match=r"'executor\.kind': a Ray worker"):
        Engine(load_campaign(repo), executor=LocalExecutor()).run()


def test_a_holdout_in_place_of_a_file_the_commits_lack_is_refused(tmp_path: Path) -> None:
    repo = holdout_repo(tmp_path, "none", in_place_of={"unseen/eval.txt": "data/missing.txt"})
    with pytest.raises(ConfigError, match=r"holdout\.in_place_of': data/missing\.txt"):
        Engine(load_campaign(repo), executor=LocalExecutor()).run()


# == what a failed holdout run printed ==========================================================

# No digit in it: a metric read as "the last number printed" must find none.
MARK = "holdout-output-" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))


# Holdout commands that fail loudly, each its own way.
FAILING = {
    "crash": f"echo {MARK}; echo {MARK} >&2; exit 3",
    "unreadable": f"echo 'score: {MARK}'",  # no number: its output in the parse error
    "timeout": f"echo {MARK} >&2; sleep 30",
}


@pytest.mark.parametrize("isolation", modes())
def test_a_failed_holdout_run_never_reaches_the_proposer_or_a_view(
    tmp_path: Path, isolation: str
) -> None:
    # The candidate's code writes the holdout out as the holdout run fails (here the command
    # itself prints the marker): nothing of what it printed may leave the logs.
    for kind, failing in FAILING.items():
        repo = holdout_repo(
            tmp_path / kind, isolation, command=failing, files=["unseen/**"], timeout=2
        )
        better = honest(CHEATER)  # better on the visible split: the holdout runs
        records, proposer, _ = campaign(repo, write_model(better), write_model(better + "\n"))
        state = repo / ".autoresearch" / NAME
        assert records[1].status is Status.CRASH and records[1].reason == HOLDOUT_FAILED, kind
        # the run did print it: into the campaign's logs, for people
        logs = b"".join(p.read_bytes() for p in (state / "logs").glob("*holdout*"))
        assert MARK.encode() in logs, kind
        # never into what a program or the next proposer reads
        assert len(proposer.contexts) == 2
        for ctx in proposer.contexts:
            assert MARK not in ctx.prompt and MARK not in ctx.memory, kind
            assert all(MARK not in note.reason for note in ctx.history), kind
        for name in ("ledger.jsonl", "results.tsv", "state.json", "memory.md"):
            if (state / name).exists():
                assert MARK not in (state / name).read_text(), (kind, name)
        assert MARK not in json.dumps(campaign_status(state)), kind
        tools = CampaignTools(repo)
        assert MARK not in tools.log().model_dump_json() + tools.show(1).model_dump_json()
        with served(repo) as get:
            assert MARK not in get("/api/attempts") + get("/api/status") + get("/"), kind
        written = write_report(state)
        assert MARK not in written.markdown.read_text() + written.html.read_text(), kind


def test_an_old_ledgers_holdout_output_stays_out_of_the_prompt() -> None:
    # A ledger written before the reason was fixed holds the run's output in it.
    record = AttemptRecord.from_json(
        {
            "iteration": 1,
            "status": "crash",
            "description": "d",
            "reason": f"holdout exited with code 1: {MARK}",
            "holdout": {"error": f"holdout exited with code 1: {MARK}"},
        }
    )
    (note,) = history_notes([record])
    assert note.reason == HOLDOUT_FAILED


# == no view a program can query serves the holdout's numbers ===================================


def keys(data: Any) -> set[str]:
    """Every key of a JSON value, at any depth."""
    if isinstance(data, dict):
        return set(data) | {k for v in data.values() for k in keys(v)}
    if isinstance(data, list):
        return {k for v in data for k in keys(v)}
    return set()


def test_no_api_serves_the_unseen_splits_numbers(tmp_path: Path) -> None:
    repo = holdout_repo(tmp_path, "none")
    memorise = honest(CHEATER)
    rule = f"def predict(x):\n    return {MEMORISED!r}.get(x, 2 * x)\n"  # and generalises
    records, _, _ = campaign(repo, write_model(memorise), write_model(rule))
    assert [r.status for r in records] == [Status.BASELINE, Status.OVERFIT, Status.KEEP]
    assert all(r.holdout is not None for r in records[1:])  # for people: in the ledger
    state = repo / ".autoresearch" / NAME
    tools = CampaignTools(repo)
    for served_json in (
        [a.model_dump() for a in tools.log().attempts],
        tools.show(1).model_dump(),
        tools.show(2).model_dump(),
        tools.status().model_dump(),
        campaign_status(state),
    ):
        assert "holdout" not in keys(served_json)
        assert "holdout" not in " ".join(tools.show(1).logs)
    with served(repo) as get:
        attempts = json.loads(get("/api/attempts"))
        assert len(attempts) == 3 and "holdout" not in keys(attempts)
        assert "holdout" not in keys(json.loads(get("/api/status")))
        assert "holdout" not in get("/")


class served:
    """The campaign's dashboard, asked with its token."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def __enter__(self) -> Any:
        state = self.repo / ".autoresearch" / NAME
        self.server = make_server(self.repo, state, "127.0.0.1", 0)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        token = (state / "dashboard.token").read_text().strip()

        def get(path: str) -> str:
            request = urllib.request.Request(base + path)
            request.add_header("Authorization", f"Bearer {token}")
            with urllib.request.urlopen(request, timeout=10) as response:
                return str(response.read().decode())

        return get

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_check_says_what_tells_the_holdout_run_apart(tmp_path: Path) -> None:
    from autoresearch.cli.preflight import run_check

    in_place = run_check(load_campaign(holdout_repo(tmp_path / "in-place", "none")))
    assert "the metric's own run with unseen/eval.txt in place of data/eval.txt" in (
        in_place.holdout
    )
    old = holdout_repo(
        tmp_path / "old", "none", command=f"{PY} bench.py unseen", files=["unseen/**"]
    )
    told = run_check(load_campaign(old)).holdout
    assert "command line" in told and "only for the holdout run" in told
