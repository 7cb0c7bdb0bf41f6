"""The trust boundary, second round: channels around the sandbox that the first attack suite
did not try. Each test is a real campaign whose candidate code or proposer misbehaves, and
asserts the promise itself (the kept number against the commit's honest number, what reached
the proposer, the user's files), as `tests/test_isolation.py` does, under every isolation
mode; a mode that does not defend a class is a strict xfail naming the gap.

- the harness swapped during a run and written back before the fingerprint is checked;
- the kernel's per-user keyrings, shared by every process of the user and outliving them:
  a cache across a candidate's own runs, and a way from the measurement to the proposer;
- credentials in the home folder under names no deny list knows.
"""

from __future__ import annotations

import os
import platform
import uuid
from pathlib import Path

import pytest

from autoresearch.attempt import Status
from test_isolation import (
    HONEST,
    NAME,
    assert_honest,
    candidate_running,
    everything_written,
    ledger,
    modes,
    run,
    user_repo,
    user_state,
)

HARNESS_SWAP = (
    "none: harness files are writable while the metric runs; a swap written back before "
    "the check after the run passes the fingerprint"
)
KEYRING = "none: commands share the user's kernel keyrings"
HOME = "none: commands read the whole home folder"

# add_key and keyctl, as the native system call table numbers them.
KEYCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine())
needs_keycalls = pytest.mark.skipif(KEYCALLS is None, reason="keyring calls not known here")


# -- the harness, swapped and written back during one run -------------------------------------


# Run as a script before the harness: the candidate's own step of the metric command (a
# training script before the evaluation). The fake scores 0, then puts the original back,
# bytes and times, so that the harness's fingerprint after the run matches.
SWAP_FILE = """
import os, sys
if __name__ == "__main__":
    try:
        real = open("bench.py", "rb").read()
        st = os.stat("bench.py")
        fake = (
            "import os\\n"
            f"open('bench.py', 'wb').write({real!r})\\n"
            f"os.utime('bench.py', ns=({st.st_atime_ns}, {st.st_mtime_ns}))\\n"
            "print('score: 0')\\n"
        )
        open("bench.py", "w").write(fake)
    except OSError as exc:
        print("swap refused:", exc, file=sys.stderr)
N = 9
"""

SWAP_FOLDER = """
import os, sys
if __name__ == "__main__":
    try:
        os.rename("judge", "judge.orig")
        os.mkdir("judge")
        open("judge/score.py", "w").write(
            "import os, shutil\\n"
            "shutil.rmtree('judge'); os.rename('judge.orig', 'judge')\\n"
            "def score(n):\\n    return 0\\n"
        )
    except OSError as exc:
        print("swap refused:", exc, file=sys.stderr)
N = 9
"""


def _swap(tmp_path: Path, isolation: str, candidate: str, **options: object) -> None:
    attack = f"    cat > calc.py <<'EOF'\n{candidate.strip()}\nEOF"
    repo, state = user_repo(
        tmp_path,
        isolation,
        {1: attack, 2: HONEST},
        **{"metric.command": "python calc.py && python bench.py"},
        **options,  # type: ignore[arg-type]
    )
    before = user_state(repo)
    run(repo)
    records = ledger(state)
    assert_honest(repo, records)
    assert all(r.metric != 0 for r in records if r.status.sets_best), records
    assert user_state(repo) == before


@pytest.mark.parametrize("isolation", modes(none=HARNESS_SWAP))
def test_harness_swapped_and_written_back_during_the_run(tmp_path: Path, isolation: str) -> None:
    _swap(tmp_path, isolation, SWAP_FILE)


@pytest.mark.parametrize("isolation", modes(none=HARNESS_SWAP))
def test_harness_folder_moved_aside_during_the_run(tmp_path: Path, isolation: str) -> None:
    bench = (
        "import sys\nsys.path.insert(0, 'judge')\nimport calc, score\n"
        "print(f'score: {score.score(calc.N)}')\n"
    )
    _swap(
        tmp_path,
        isolation,
        SWAP_FOLDER,
        bench=bench,
        files={"judge/score.py": "def score(n):\n    return abs(n - 3)\n"},
        harness=["bench.py", "judge/score.py"],
    )


# -- the kernel's keyrings -------------------------------------------------------------------


def _keyring_code(key: str) -> str:
    add_key, keyctl = KEYCALLS or (0, 0)
    return f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
KEY = {key!r}.encode()
def found():  # KEYCTL_SEARCH (10) in the user keyring (-4)
    return libc.syscall({keyctl}, 10, -4, b"user", KEY, 0) > 0
def store(value):
    libc.syscall({add_key}, b"user", KEY, value, len(value), -4)
def read():
    kid = libc.syscall({keyctl}, 10, -4, b"user", KEY, 0)
    if kid <= 0:
        return b""
    buf = ctypes.create_string_buffer(4096)
    n = libc.syscall({keyctl}, 11, kid, buf, 4096)  # KEYCTL_READ
    return buf.raw[:max(n, 0)]
"""


@needs_keycalls
@pytest.mark.parametrize("isolation", modes(none=KEYRING))
def test_candidate_caches_its_score_in_the_user_keyring(tmp_path: Path, isolation: str) -> None:
    # One deterministic commit whose later runs read what its first run left: honest on
    # the first run (9 -> score 6), perfect after it.
    key = "ar-cache-" + uuid.uuid4().hex
    assert_no_cache_across_runs(tmp_path, isolation, _keyring_code(key), "store(b'1')")


INODE_FLAGS = "none: a command may set inode flags (chattr) on the measurement folder"
# The measurement folder's own inode flags (FS_IOC_GETFLAGS), and the mark: no access times.
FLAGS_FOUND = """
import fcntl, os, struct
def flags():
    fd = os.open(".", os.O_RDONLY)
    try:
        return struct.unpack("i", fcntl.ioctl(fd, 0x80086601, bytes(8))[:4])[0]
    except OSError:
        return 0
    finally:
        os.close(fd)
def found():
    return bool(flags() & 0x80)
"""
_FLAGS_CODE = (
    FLAGS_FOUND
    + """
def store():
    fd = os.open(".", os.O_RDONLY)
    try:
        fcntl.ioctl(fd, 0x40086602, struct.pack("i", flags() | 0x80) + bytes(4))
    except OSError:
        pass
    finally:
        os.close(fd)
"""
)


@pytest.mark.parametrize("isolation", modes(none=INODE_FLAGS))
def test_candidate_marks_the_measurement_folder_with_an_inode_flag(
    tmp_path: Path, isolation: str
) -> None:
    # No byte changes and the folder's watch gets no event: the flag itself is the mark.
    assert_no_cache_across_runs(tmp_path, isolation, _FLAGS_CODE, "store()")


def assert_no_cache_across_runs(tmp_path: Path, isolation: str, code: str, store: str) -> None:
    """A candidate whose `code` defines `found()` and whose `store` leaves a mark: honest
    (9, score 6) until it finds the mark, perfect (3) after. Each of its three runs must
    give the honest 6."""
    candidate = f"N = 9\n{code}\nif found():\n    N = 3\nelse:\n    {store}\n"
    attack = f"    cat > calc.py <<'EOF'\n{candidate}EOF"
    repo, state = user_repo(
        tmp_path, isolation, {1: attack}, **{"decision.rule": "repeats", "decision.repeats": 3}
    )
    run(repo)
    records = ledger(state)
    assert_honest(repo, records)
    measured = records[1]
    assert set(measured.samples or [measured.metric]) == {6.0}, measured


@needs_keycalls
@pytest.mark.parametrize("isolation", modes(none=KEYRING))
def test_measurement_hands_a_secret_to_the_next_proposer_through_the_keyring(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The metric may see a secret the proposer never gets (`pass_env`); its candidate code
    # leaves it in the user keyring, and the next proposer commits what it finds there.
    secret = "metric-only-" + uuid.uuid4().hex
    monkeypatch.setenv("AR_METRIC_TOKEN", secret)
    key = "ar-leak-" + uuid.uuid4().hex
    code = _keyring_code(key)
    candidate = f"N = 7\n{code}\nimport os\nstore(os.environ.get('AR_METRIC_TOKEN', '').encode())\n"
    reader = f"{code}\nprint('# ' + read().decode())\n"
    first = f"    cat > calc.py <<'EOF'\n{candidate}EOF"
    second = (
        f"    cat > \"$TMPDIR/read.py\" <<'EOF'\n{reader}EOF\n"
        f'    python "$TMPDIR/read.py" >> calc.py'
    )
    repo, _ = user_repo(
        tmp_path, isolation, {1: first, 2: second}, **{"sandbox.pass_env": ["AR_METRIC_TOKEN"]}
    )
    run(repo)
    assert secret.encode() not in everything_written(repo)


# -- credentials in the home folder ----------------------------------------------------------


# Where tools keep logins and tokens; the last is a tool no list could know.
CREDENTIALS = (
    ".npmrc",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".config/gh/hosts.yml",
    ".cache/huggingface/token",
    ".vault-token",
    ".config/rclone/rclone.conf",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".ray/auth_token",
    ".bash_history",
    ".zsh_history",
    ".docker/config.json",
    ".config/some-new-tool/token",
)


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    home = tmp_path / "home"
    secret = "home-" + uuid.uuid4().hex
    for name in CREDENTIALS:
        path = home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"token={secret}\n")
    # A toolchain in the home folder, which commands still run.
    tool = home / ".local" / "bin" / "ar-score-tool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho ok\n")
    tool.chmod(0o755)
    model = home / ".cache" / "huggingface" / "hub" / "model.txt"
    model.parent.mkdir(parents=True)
    model.write_text("weights\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    return home, secret


STEAL = "cat ~/.[a-z]* ~/.*/* ~/.*/*/* ~/.*/*/*/* 2>/dev/null; find ~ -type f -exec cat {} +"


@pytest.mark.parametrize("isolation", modes(none=HOME))
def test_candidate_reads_credentials_anywhere_in_the_home_folder(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = _home(tmp_path, monkeypatch)
    shell = f"({STEAL}) | tee /dev/stderr"
    repo, _ = user_repo(tmp_path, isolation, {1: candidate_running(shell)})
    run(repo)
    assert secret.encode() not in everything_written(repo)


@pytest.mark.parametrize("isolation", modes(none=HOME))
def test_proposer_commits_credentials_from_the_home_folder(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = _home(tmp_path, monkeypatch)
    attack = HONEST + f"\n    ({STEAL}) | sed 's/^/# /' >> calc.py"
    repo, _ = user_repo(tmp_path, isolation, {1: attack})
    run(repo)
    assert secret.encode() not in everything_written(repo)


@pytest.mark.parametrize("isolation", modes())
def test_toolchains_in_the_home_folder_still_run(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The allowlist must not break the campaign: a program on PATH under home runs, and a
    # downloaded model is readable.
    _home(tmp_path, monkeypatch)
    bench = (
        "import calc, os, subprocess\n"
        "assert subprocess.run(['ar-score-tool'], capture_output=True).stdout == b'ok\\n'\n"
        "open(os.path.expanduser('~/.cache/huggingface/hub/model.txt')).read()\n"
        'print(f"score: {abs(calc.N - 3)}")\n'
    )
    repo, state = user_repo(tmp_path, isolation, {1: HONEST}, bench=bench)
    run(repo)
    records = ledger(state)
    assert [r.status for r in records] == [Status.BASELINE, Status.KEEP], records
    assert_honest(repo, records)
    assert (tmp_path / "repo" / ".autoresearch" / NAME).is_dir()


@pytest.mark.parametrize("isolation", modes(none=HOME))
def test_a_checkout_inside_the_home_folder(
    tmp_path: Path, isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where most checkouts live (~/src/project): the campaign's folders are mounted inside
    # the empty home, and the credentials beside the checkout stay out of sight.
    secret = "home-" + uuid.uuid4().hex
    (tmp_path / ".npmrc").write_text(f"//registry/:_authToken={secret}\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    shell = f"({STEAL}) | tee /dev/stderr"
    attack = candidate_running(shell)
    # The proposer's script lives in the home folder too: shown as `home_readable` names it.
    script = str(tmp_path / "propose.sh")
    repo, state = user_repo(tmp_path, isolation, {1: attack}, **{"sandbox.home_readable": [script]})
    run(repo)
    records = ledger(state)
    assert_honest(repo, records)
    assert [r.status for r in records] == [Status.BASELINE, Status.KEEP], records
    assert secret.encode() not in everything_written(repo)
