"""The trust boundary, third round: ways around the sandbox that neither
`tests/test_isolation.py` nor `tests/test_isolation_channels.py` try. Each test is a real
campaign (or a real sandboxed command) whose candidate code or proposer misbehaves, run
under bubblewrap, and asserts the promise itself: the kept number against the commit's
honest number, what reached the proposer's commits, the user's files byte for byte.

An attack that breaks a promise today is a strict xfail whose reason names the mechanism;
the others are regression tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord
from autoresearch.checks.verify import verify_campaign
from autoresearch.testing.repo import git
from syscalls32 import ABI_32
from test_isolation import (
    DOTENV_SECRET,
    HONEST,
    NAME,
    assert_honest,
    candidate_running,
    everything_written,
    ledger,
    run,
    user_repo,
    user_state,
)
from test_isolation_channels import FLAGS_FOUND, assert_no_cache_across_runs

SANDBOX = "bwrap"


def commit_files(repo: Path, files: dict[str, str], links: dict[str, str] | None = None) -> None:
    """One more commit on the user's branch holding exactly `files` and `links` (the
    user's other uncommitted work stays uncommitted)."""
    names = []
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        names.append(rel)
    for rel, target in (links or {}).items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        path.symlink_to(target)
        names.append(rel)
    git(repo, "add", "-f", "--", *names)
    git(repo, "commit", "-qm", "more", "--", *names)


def committed_by_the_proposer(repo: Path, records: list[AttemptRecord]) -> bytes:
    """Every file of every candidate commit the campaign recorded: what the proposer made."""
    chunks = []
    for record in records:
        if record.commit and record.iteration >= 1:
            listing = git(repo, "ls-tree", "-r", "--name-only", record.commit).splitlines()
            for rel in listing:
                chunks.append(
                    subprocess.run(
                        ["git", "-C", str(repo), "show", f"{record.commit}:{rel}"],
                        capture_output=True,
                        check=False,
                    ).stdout
                )
    return b"\n".join(chunks)


def never_kept_zero(records: list[AttemptRecord]) -> None:
    assert all(r.metric != 0 for r in records if r.status.sets_best), records


# == the harness, beyond its own files ==========================================================

# The scoring runs in a process of its own, after the candidate's step, and reads only the
# candidate's source text (never imports it), as the README advises: the harness `bench.py`
# imports `scorer.py`, which is named in `harness` too.
TWO_STEP = "python calc.py && python bench.py"
SCORER = "def score(n):\n    return abs(n - 3)\n"
READS_SOURCE = (
    "import re\nn = int(re.search(r'^N = (\\d+)', open('calc.py').read(), re.M).group(1))\n"
)
BENCH_WITH_SCORER = READS_SOURCE + "import scorer\nprint(f'score: {scorer.score(n)}')\n"


def _candidate(body: str) -> str:
    return f"    cat > calc.py <<'EOF'\nN = 9\nif __name__ == '__main__':\n{body}EOF"


PYC_POISON = _candidate(
    "    import importlib.util, os\n"
    "    from importlib._bootstrap_external import _code_to_timestamp_pyc\n"
    "    src = os.path.abspath('scorer.py')\n"
    "    st = os.stat(src)\n"
    "    code = compile('def score(n):\\n    return 0\\n', src, 'exec')\n"
    "    pyc = importlib.util.cache_from_source(src)\n"
    "    os.makedirs(os.path.dirname(pyc), exist_ok=True)\n"
    "    open(pyc, 'wb').write(_code_to_timestamp_pyc(code, st.st_mtime, st.st_size))\n"
)


def test_harness_module_replaced_by_forged_bytecode(tmp_path: Path) -> None:
    repo, state = user_repo(
        tmp_path,
        SANDBOX,
        {1: PYC_POISON, 2: HONEST},
        bench=BENCH_WITH_SCORER,
        files={"scorer.py": SCORER},
        harness=["bench.py", "scorer.py"],
        **{"metric.command": TWO_STEP},
    )
    before = user_state(repo)
    run(repo)
    records = ledger(state)
    assert_honest(repo, records)
    never_kept_zero(records)
    assert user_state(repo) == before


SHADOW_STDLIB = _candidate(
    "    open('statistics.py', 'w').write('def fmean(values):\\n    return 0.0\\n')\n"
)
BENCH_WITH_STDLIB = (
    READS_SOURCE + "import statistics\nprint(f'score: {statistics.fmean([abs(n - 3)])}')\n"
)


def test_standard_module_shadowed_for_a_harness_in_its_own_process(tmp_path: Path) -> None:
    repo, state = user_repo(
        tmp_path,
        SANDBOX,
        {1: SHADOW_STDLIB, 2: HONEST},
        bench=BENCH_WITH_STDLIB,
        **{"metric.command": TWO_STEP},
    )
    run(repo)
    records = ledger(state)
    assert_honest(repo, records)
    never_kept_zero(records)


REWRITE_LINK_TARGET = _candidate(
    "    open('tools/bench_impl.py', 'w').write(\"print('score: 0')\\n\")\n"
)


def test_harness_file_that_is_a_link_has_its_target_rewritten(tmp_path: Path) -> None:
    repo, state = user_repo(
        tmp_path, SANDBOX, {1: REWRITE_LINK_TARGET, 2: HONEST}, **{"metric.command": TWO_STEP}
    )
    impl = READS_SOURCE + "print(f'score: {abs(n - 3)}')\n"
    commit_files(repo, {"tools/bench_impl.py": impl}, links={"bench.py": "tools/bench_impl.py"})
    before = user_state(repo)
    run(repo)
    records = ledger(state)
    assert_honest(repo, records)
    never_kept_zero(records)
    assert user_state(repo) == before


# == what the proposer reads through the objects it borrows =====================================

HOLDOUT_SECRET = "holdout-" + uuid.uuid4().hex
HOLDOUT = {
    "holdout.command": "cat data/holdout.txt >/dev/null && python bench.py",
    "holdout.files": ["data/holdout.txt"],
}


def test_proposer_reads_the_holdout_from_the_repository_history(tmp_path: Path) -> None:
    attack = HONEST + "\n    git log -p | grep -o 'holdout-[0-9a-f]*' | sed 's/^/# /' >> calc.py"
    repo, state = user_repo(tmp_path, SANDBOX, {1: attack}, **HOLDOUT)
    commit_files(repo, {"data/holdout.txt": f"{HOLDOUT_SECRET}\n"})
    git(repo, "rm", "-q", "--cached", "data/holdout.txt")
    git(repo, "commit", "-qm", "keep the holdout out of the repository")
    outcome = run(repo, attacks=False)
    # Refused before any proposal: the history would show it.
    assert outcome.error is not None and "was committed in the history" in str(outcome.error)
    assert not state.joinpath("ledger.jsonl").exists() or all(
        r.iteration == 0 for r in ledger(state)
    )


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the proposer's .git borrows the user's whole object store through alternates: "
        "`git cat-file --batch-all-objects` lists every object in it, the blobs of a "
        "stash made with --all (the ignored .env) included, long after the stash was popped"
    ),
)
def test_proposer_reads_a_popped_stash_of_ignored_files_from_the_objects(tmp_path: Path) -> None:
    attack = (
        HONEST + "\n    git cat-file --batch-all-objects --batch | grep -ao 'dotenv-[0-9a-f]*'"
        " | sed 's/^/# /' >> calc.py"
    )
    repo, state = user_repo(tmp_path, SANDBOX, {1: attack})
    # The user set everything aside for a moment, ignored files too, and took it back.
    git(repo, "stash", "push", "--all", "-q")
    git(repo, "stash", "pop", "-q")
    assert DOTENV_SECRET in (repo / ".env").read_text()
    run(repo)
    assert DOTENV_SECRET.encode() not in committed_by_the_proposer(repo, ledger(state))


# == the kernel: a user namespace of the command's own ==========================================


def test_candidate_unmounts_what_hides_the_checkout_in_a_user_namespace(tmp_path: Path) -> None:
    # No capability is handed on, but an unprivileged user namespace gives the command a
    # full set of its own: it may unmount, bind and remount in its own mount namespace.
    shell = (
        "unshare -Urm sh -c '"
        "umount -l @REPO@ 2>&1; cat @REPO@/.env; "
        "mount -o remount,rw / 2>&1; mount --bind / /mnt 2>&1; cat /mnt@REPO@/.env; "
        "mount -t tmpfs none @REPO@ 2>&1; echo gone > @REPO@/README.md; "
        "echo owned >> /mnt@REPO@/README.md"
        "' 2>&1 | tee /dev/stderr"
    )
    repo, _ = user_repo(tmp_path, SANDBOX, {1: candidate_running(shell)})
    before = user_state(repo)
    run(repo)
    assert DOTENV_SECRET.encode() not in everything_written(repo)
    assert user_state(repo) == before


# == what a failed run's output carries to the proposer =========================================


def test_guard_output_hands_a_metric_only_secret_to_the_proposer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "metric-only-" + uuid.uuid4().hex
    monkeypatch.setenv("AR_METRIC_TOKEN", secret)
    candidate = (
        "    cat > calc.py <<'EOF'\nimport os, sys\nN = 2\n"
        "if sys.argv[0] == '-c' and os.environ.get('AR_METRIC_TOKEN'):\n"
        "    print(os.environ['AR_METRIC_TOKEN'])\n    raise SystemExit(1)\nEOF"
    )
    thief = (
        HONEST + "\n    grep -ao 'metric-only-[0-9a-f]*' \"$AUTORESEARCH_PROMPT_FILE\""
        " | sed 's/^/# /' >> calc.py"
    )
    repo, state = user_repo(
        tmp_path,
        SANDBOX,
        {1: candidate, 2: thief},
        **{
            "guard.command": "python -c 'import calc'",
            "sandbox.pass_env": ["AR_METRIC_TOKEN"],
        },
    )
    run(repo)
    assert secret.encode() not in committed_by_the_proposer(repo, ledger(state))


# == what candidate content does to the user's terminal =========================================

# OSC 52 (write the clipboard), a window title, a screen clear, a bell.
ESCAPES = "\\033]52;c;cm0gLXJmIH4K\\007 \\033]0;pwned\\007 \\033[2J"
LOUD = (
    HONEST + f"\n    printf 'IDEA: cache the table {ESCAPES}\\n'"
    f"\n    printf 'set N to 7 {ESCAPES}\\n'"
)
CRASHES_LOUDLY = (
    "    cat > calc.py <<'EOF'\nimport sys\n"
    f"sys.stderr.write('boom {ESCAPES}\\n')\nraise SystemExit(1)\nEOF"
)


def _loud_campaign(tmp_path: Path) -> tuple[Path, Path]:
    repo, state = user_repo(tmp_path, SANDBOX, {1: LOUD, 2: CRASHES_LOUDLY})
    run(repo)
    assert len(ledger(state)) == 3
    return repo, state


def test_commands_print_no_escape_sequence_a_candidate_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from autoresearch.cli import main

    repo, _ = _loud_campaign(tmp_path)
    monkeypatch.chdir(repo)
    printed = []
    for args in (["log"], ["status"], ["ideas"], ["show", "1"], ["show", "2"], ["diff", "1"]):
        result = CliRunner().invoke(main, args, color=True)
        assert result.exception is None or isinstance(result.exception, SystemExit), args
        printed.append(result.output)
    seen = "\n".join(printed)
    assert "pwned" in seen or "cache the table" in seen, seen  # the content was shown
    # The commands' own colours (SGR) aside, no escape or bell reaches the terminal.
    bare = re.sub(r"\x1b\[[0-9;]*m", "", seen)
    assert "\x1b" not in bare and "\x07" not in bare, seen


def test_backlog_in_the_checkout_holds_no_escape_sequence(tmp_path: Path) -> None:
    repo, _ = _loud_campaign(tmp_path)
    backlog = repo / "autoresearch.ideas.md"
    text = backlog.read_text() if backlog.exists() else ""
    assert "cache the table" in text, text
    assert "\x1b" not in text and "\x07" not in text


# == two slots at once: a measurement and a proposer side by side ===============================


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.xfail(
    strict=True,
    reason=(
        "with [executor] jobs > 1 another slot's proposer runs while a candidate's holdout "
        "runs, and both share the host's loopback by default (`[sandbox] network = true`, "
        '`[proposer] network = "on"`): the candidate sends the holdout file to a port the '
        "other proposer listens on, and that proposer commits it"
    ),
)
def test_holdout_sent_over_loopback_to_the_proposer_of_another_slot(tmp_path: Path) -> None:
    port = _free_port()
    sender = (
        "    cat > calc.py <<'EOF'\nimport os, socket\nN = 2\n"
        "if os.path.exists('data/holdout.txt'):\n"
        "    try:\n"
        f"        with socket.create_connection(('127.0.0.1', {port}), 2) as s:\n"
        "            s.sendall(open('data/holdout.txt', 'rb').read())\n"
        "    except OSError:\n        pass\nEOF"
    )
    listener = (
        "import socket\nserver = socket.socket()\n"
        "server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"server.bind(('127.0.0.1', {port}))\nserver.listen()\nserver.settimeout(15)\n"
        "try:\n    conn, _ = server.accept()\n    conn.settimeout(5)\n"
        "    print('# ' + conn.recv(4096).decode(errors='replace').strip())\n"
        "except OSError:\n    pass\n"
    )
    thief = (
        f"    cat > \"$TMPDIR/listen.py\" <<'EOF'\n{listener}EOF\n"
        "    echo 'N = 7' > calc.py\n"
        '    python "$TMPDIR/listen.py" >> calc.py'
    )
    repo, state = user_repo(
        tmp_path,
        SANDBOX,
        {1: sender, 2: thief},
        **{**HOLDOUT, "executor.jobs": 2},
    )
    holdout = repo / "data" / "holdout.txt"
    holdout.parent.mkdir()
    holdout.write_text(f"{HOLDOUT_SECRET}\n")
    run(repo)
    assert HOLDOUT_SECRET.encode() not in committed_by_the_proposer(repo, ledger(state))


# == the kernel's keyrings through the other system call ABIs ===================================

KEYRING_32 = (
    ABI_32
    + """
TYPE, DESC, VALUE = at(4096, b"user\\0"), at(4200, KEY + b"\\0"), at(4400, b"1")
def found():
    return i386(288, 10, -4, TYPE, DESC, 0) > 0 or x32(250, 10, -4, TYPE, DESC, 0) > 0
def store():
    i386(286, TYPE, DESC, VALUE, 1, -4)
    x32(248, TYPE, DESC, VALUE, 1, -4)
"""
)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the i386 and x32 ABIs of x86-64")
def test_candidate_caches_its_score_in_the_keyring_through_the_32_bit_abis(
    tmp_path: Path,
) -> None:
    key = "ar-cache32-" + uuid.uuid4().hex
    code = KEYRING_32.replace("KEY + ", f"{key.encode()!r} + ")
    assert_no_cache_across_runs(tmp_path, SANDBOX, code, "store()")
    # The same code outside the sandbox does reach the keyring: the attack is real here.
    probe = tmp_path / "probe.py"
    # (and takes its key out of the user keyring again: KEYCTL_UNLINK)
    probe.write_text(
        code + "\nstore()\nprint(found())\ni386(288, 9, i386(288, 10, -4, TYPE, DESC, 0), -4)\n"
    )
    done = subprocess.run(
        ["python3", str(probe)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.stdout.strip() == "True", done.stderr


# The ioctl that sets inode flags (no access times, on the measurement folder itself),
# through the same two ABIs.
FLAGS_32 = (
    ABI_32
    + FLAGS_FOUND
    + """
FLAG = at(4096, bytes(8))
def store():
    fd = os.open(".", os.O_RDONLY)
    ctypes.memmove(FLAG, struct.pack("i", flags() | 0x80), 4)
    i386(54, fd, 0x40046602, FLAG)  # FS_IOC32_SETFLAGS
    x32(514, fd, 0x40086602, FLAG)  # FS_IOC_SETFLAGS
    os.close(fd)
"""
)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the i386 and x32 ABIs of x86-64")
def test_candidate_marks_the_measurement_folder_through_the_32_bit_abis(tmp_path: Path) -> None:
    assert_no_cache_across_runs(tmp_path, SANDBOX, FLAGS_32, "store()")
    # The same code outside the sandbox does set the flag: the attack is real here.
    (tmp_path / "outside").mkdir()
    probe = tmp_path / "probe.py"
    probe.write_text(FLAGS_32 + "\nstore()\nprint(found())\n")
    done = subprocess.run(
        ["python3", str(probe)],
        cwd=tmp_path / "outside",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.stdout.strip() == "False" and not done.stderr:
        pytest.skip("this filesystem keeps no inode flags")
    assert done.stdout.strip() == "True", done.stderr


# == what the engine itself reads for a judge =================================================


@pytest.mark.parametrize(
    "target", ["@REPO@/.env", "../../../../.env"], ids=["absolute", "relative"]
)
def test_judged_file_replaced_by_a_link_to_the_users_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    # The judge's material is read by the engine, outside the sandbox, and sent to the
    # judge's API (a service outside the machine, as a rule).
    from autoresearch.testing.fake_openai import serve

    server_state, server = serve()
    server_state.add(*['{"score": 50, "reason": "fine"}'] * 40)
    monkeypatch.setenv("JUDGE_API_KEY", "k")
    attack = f"    mkdir -p docs; rm -f docs/guide.md; ln -s '{target}' docs/guide.md"
    try:
        repo, _ = user_repo(
            tmp_path,
            SANDBOX,
            {1: attack},
            files={"docs/guide.md": "# guide\n", "rubric.md": "Score the guide.\n"},
            scope=["docs/guide.md"],
            harness=["rubric.md"],
            metric=None,
            judge={
                "base_url": server_state.url,
                "model": "judge",
                "api_key_env": "JUDGE_API_KEY",
                "rubric": "rubric.md",
                "files": ["docs/*.md"],
                "rounds": 1,
            },
        )
        run(repo)
    finally:
        server.shutdown()
    sent = "\n".join(server_state.texts())
    assert "# guide" in sent  # the baseline was judged
    assert DOTENV_SECRET not in sent


# == daemons the kernel does not list in the engine's network namespace =========================

LISTEN_ONCE = """
import socket, sys
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen()
print("ready", flush=True)
server.settimeout(60)
try:
    conn, _ = server.accept()
    conn.settimeout(5)
    open(sys.argv[2], "wb").write(conn.recv(4096) or b"(connected)")
except OSError:
    pass
"""


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the sockets covered are those /proc/net/unix lists, which is per network "
        "namespace: a daemon that bound its socket file in another one (a container's, a "
        "service's with PrivateNetwork) is not listed, and connect() by path works across "
        "namespaces, so the command reaches it"
    ),
)
def test_candidate_talks_to_a_daemon_bound_in_another_network_namespace(tmp_path: Path) -> None:
    import shutil
    import tempfile

    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    folder = Path(tempfile.mkdtemp(prefix="ar-netns-", dir="/tmp"))  # short: sun_path
    path, got = folder / "d.sock", tmp_path / "received"
    daemon = subprocess.Popen(
        ["unshare", "--net", "python3", "-c", LISTEN_ONCE, str(path), str(got)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert daemon.stdout is not None and daemon.stdout.readline().strip() == "ready"
        code = (
            "import socket; s = socket.socket(socket.AF_UNIX); "
            f"s.connect({str(path)!r}); s.sendall(b'run: rm -rf ~')"
        )
        repo, _ = user_repo(tmp_path, SANDBOX, {1: candidate_running(f"python3 -c {code!r}")})
        run(repo)
    finally:
        daemon.kill()
        daemon.wait()
        path.unlink(missing_ok=True)
        folder.rmdir()
    assert not got.exists(), got.read_bytes()


# == names git and the engine must carry whole ==================================================

# A newline, a byte that is not UTF-8, a leading dash, a quote and git's pathspec magic.
WEIRD = (b"new\nline", b"bad\xffbyte", b"-rf", b'q"uote', b":(top)bench.py", b"*")


def test_weird_names_from_the_proposer_and_the_candidate_leave_the_engine_standing(
    tmp_path: Path,
) -> None:
    names = ", ".join(repr(n) for n in WEIRD)

    def maker(folder: str) -> str:
        return (
            f"import os\nos.makedirs({folder!r}, exist_ok=True)\nfor n in [{names}]:\n"
            f"    open(os.path.join({folder.encode()!r}, n), 'wb').write(b'N = 3\\n')\n"
        )

    in_scope = HONEST + f"\n    python3 - <<'EOF'\n{maker('w')}EOF"
    out_of_scope = HONEST + f"\n    python3 - <<'EOF'\n{maker('.')}EOF"
    candidate = (
        "    cat > calc.py <<'EOF'\nN = 8\nif __name__ == '__main__':\n"
        + "".join(f"    {line}\n" for line in maker(".").splitlines())
        + "EOF"
    )
    repo, state = user_repo(
        tmp_path,
        SANDBOX,
        {1: in_scope, 2: out_of_scope, 3: candidate, 4: "    echo 'N = 4' > calc.py"},
        scope=["calc.py", "w/**"],
        **{"metric.command": "python calc.py && python bench.py"},
    )
    before = user_state(repo)
    result = run(repo)
    assert result.error is None, result.error
    records = ledger(state)
    assert [r.iteration for r in records] == [0, 1, 2, 3, 4], records
    assert_honest(repo, records)
    assert user_state(repo) == before


# == the agent-driven mode: the environment `step` is started with ============================


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the metric's environment is the allowlisted part of the environment `step` was "
        "started with, and the agent starts `step` from its own shell: a PATH (or "
        "PYTHONPATH, LD_LIBRARY_PATH) it exported there picks the interpreter the metric "
        "runs, and a fake `python` prints the number; it is recorded as measured, not as "
        "self-reported"
    ),
)
def test_agent_picks_the_metrics_interpreter_through_the_environment_of_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autoresearch.agent import mode as agent_mode
    from autoresearch.config import load_campaign
    from autoresearch.executors import LocalExecutor

    repo, state = user_repo(tmp_path, SANDBOX, {1: HONEST})
    agent_mode.start(load_campaign(repo), executor=LocalExecutor())
    work = agent_mode.workspace_path(load_campaign(repo))
    (work / "calc.py").write_text("N = 9\n")  # honestly 6, better than the baseline (7)
    fake = tmp_path / "agent-bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\necho 'score: 0'\n")
    (fake / "python").chmod(0o755)
    # What the agent's shell exported before it ran `autoresearch step`.
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    agent_mode.step(load_campaign(repo), "N to 9", executor=LocalExecutor())
    records = ledger(state)
    assert len(records) == 2, records
    assert_honest(repo, records)
    never_kept_zero(records)


# == a harness glob that matches a file the run creates ========================================

TESTS = (
    "import calc\n\n\ndef test_runs():\n    pass\n\n\n"
    "def test_small():\n    assert calc.N < 10\n\n\n"
    "def test_close():\n    assert abs(calc.N - 3) < 2\n"
)


def passed_score(repo: Path, commit: str) -> float | None:
    from test_isolation import n_of

    n = n_of(git(repo, "show", f"{commit}:calc.py"))
    return None if n is None else 1.0 + (n < 10) + (abs(n - 3) < 2)


ADDS_TESTS = _candidate(
    "    body = ''.join(f'def test_{k}():\\n    pass\\n' for k in range(50))\n"
    "    open('tests/test_zz_more.py', 'w').write(body)\n"
)


def test_harness_folder_gains_a_file_during_the_run(tmp_path: Path) -> None:
    import sys

    pytest_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    repo, state = user_repo(
        tmp_path,
        SANDBOX,
        {1: ADDS_TESTS, 2: HONEST},
        files={"tests/test_calc.py": TESTS},
        harness=["bench.py", "tests/**"],
        **{
            "metric.command": f"{sys.executable} calc.py && ({pytest_cmd} || true)",
            "metric.pattern": "([0-9]+) passed",
            "metric.direction": "maximize",
        },
    )
    run(repo)
    records = ledger(state)
    assert_honest(repo, records, passed_score)
    assert all((r.metric or 0) <= 3 for r in records), records


# == a Ray worker without bubblewrap ===========================================================

REWRITES_THE_HARNESS = _candidate("    open('bench.py', 'w').write(\"print('score: 0')\\n\")\n")


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_candidate_rewrites_the_harness_on_a_ray_worker_without_a_sandbox(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed")
    from autoresearch.config import ExecutorConfig, load_campaign
    from autoresearch.engine import Engine
    from autoresearch.executors.ray import RayExecutor

    repo, state = user_repo(
        tmp_path, "none", {1: REWRITES_THE_HARNESS, 2: HONEST}, **{"metric.command": TWO_STEP}
    )
    executor = RayExecutor(ExecutorConfig(kind="ray", address="local"))
    Engine(load_campaign(repo), executor=executor).run()
    records = ledger(state)
    assert len(records) >= 2, records
    assert_honest(repo, records)
    never_kept_zero(records)


# == the agent-driven mode: the decision's calibration on disk ================================


@pytest.mark.xfail(
    strict=False,  # the attack rides on random noise: some runs it does not get through
    reason=(
        "the sequential rule's calibrated boundaries are cached in a file of the user's "
        "(~/.cache/autoresearch/calibration-v<N>-judge<J>.json, or $AUTORESEARCH_CACHE_DIR) "
        "and read "
        "back as they are: the agent, which runs as the user, rewrites them and the next "
        "`step` keeps after one run a candidate the honest boundary would measure further; "
        "`verify` flags that keep only where it reads honest boundaries (another machine, "
        "or the file deleted), since it reads the same file"
    ),
)
def test_agent_rewrites_the_cached_calibration_and_step_keeps_what_the_rule_would_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    import json

    from autoresearch.agent import mode as agent_mode
    from autoresearch.config import load_campaign
    from autoresearch.executors import LocalExecutor
    from autoresearch.stats import calibration, decide

    cache = tmp_path / "cache"
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(cache))
    cached = calibration.cache_file(decide.JUDGE_VERSION)
    noisy = 'import calc, random\nprint(f"score: {abs(calc.N - 3) + random.gauss(0, 0.1)}")\n'
    repo, state = user_repo(
        tmp_path,
        SANDBOX,
        {1: HONEST},
        bench=noisy,
        iterations=5,
        **{"decision.rule": "sequential", "decision.estimator": "robust"},
    )

    def step(n: float) -> None:
        decide.calibrated_efficacy.cache_clear()  # every `step` is a process of its own
        (agent_mode.workspace_path(load_campaign(repo)) / "calc.py").write_text(f"N = {n}\n")
        agent_mode.step(load_campaign(repo), f"N to {n}", executor=LocalExecutor())

    # The poisoned boundaries must not outlive this test in the worker's own cache.
    request.addfinalizer(decide.calibrated_efficacy.cache_clear)
    agent_mode.start(load_campaign(repo), executor=LocalExecutor())
    step(9)
    assert cached.is_file(), "the step calibrated nothing"
    # The agent, between two steps: a boundary far below any z a comparison reaches, for
    # every key the rule may ask (their layout is the engine's: confidence, degrees of
    # freedom, start, estimator, screen).
    honest = cached.read_text()
    poisoned = {
        f"{samples}/0.95/{dof}/{start}/robust/0.0": -1e9
        for samples in range(2, 33)
        for dof in range(1, 64)
        for start in ("AFTER_KEEP", "PARTIAL", "FULL")
    }
    cached.write_text(json.dumps(poisoned))
    # Each better than the best by one standard deviation of the noise: too little for
    # the honest boundary after one run, enough to pass the first look's screen.
    step(8.9)
    step(8.8)
    assert ledger(state)[-1].iteration == 3
    # Every verdict must follow from the rule honestly calibrated: `verify` with the
    # boundaries the engine had computed, as on a machine the agent never touched.
    cached.write_text(honest)
    decide.calibrated_efficacy.cache_clear()
    report = verify_campaign(repo, state, NAME)
    assert report.ok, report.problems


# == credentials inside the toolchain folders the home allowlist shows ==========================

# Config files that toolchains keep inside their own install folder, where a login or a
# private index's token is written by the usual commands (`npm config set --global`,
# `pip config --site`, `conda config --system` / `conda token set`).
TOOLCHAIN_CREDENTIALS = (
    ".nvm/versions/node/v20.11.0/etc/npmrc",
    "miniconda3/.condarc",
    ".pyenv/versions/3.11.7/pip.conf",
)


def test_candidate_reads_tokens_kept_inside_toolchain_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    secret = "tool-" + uuid.uuid4().hex
    for k, rel in enumerate(TOOLCHAIN_CREDENTIALS):
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"//registry.example.com/:_authToken={secret}-{k}\n")
    monkeypatch.setenv("HOME", str(home))
    steal = "find ~ -type f -exec cat {} + 2>/dev/null | tee /dev/stderr"
    repo, _ = user_repo(tmp_path, SANDBOX, {1: candidate_running(steal)})
    run(repo)
    written = everything_written(repo)
    read = [
        rel for k, rel in enumerate(TOOLCHAIN_CREDENTIALS) if f"{secret}-{k}".encode() in written
    ]
    assert read == [], read
