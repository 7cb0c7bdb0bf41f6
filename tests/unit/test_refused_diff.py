"""A refused attempt is inspectable: `diff N` and `show N` show what a scope violation, a
harness edit (tampered) and a file over `[scope] max_file_mb` (edit_refused) changed,
marked as refused and escaped, while none of that content enters the user's repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from campaigns import script_campaign
from conftest import Runner, git, ledger, snapshot

# The proposer's three refused attempts: a file outside the scope (with a terminal escape
# in it), a file above the 2 MiB cap, then an edit of the benchmark (which halts the run).
SCRIPT = r"""
if [ "$AUTORESEARCH_ITERATION" = 1 ]; then
  printf 'OUTSIDE_MARK line\n\033]0;pwned\007 title\n' > notes.txt
  sed -i 's/10/9/' calc.py; echo "notes beside the change"
elif [ "$AUTORESEARCH_ITERATION" = 2 ]; then
  mkdir -p data; yes BIGFILE_MARK | head -c 3000000 > data/big.txt; echo "a big file"
else
  echo 'print(0)  # TAMPER_MARK' >> bench.py; echo "a better benchmark"
fi
"""

SRC = Path(__file__).resolve().parents[2] / "src"
NOTES = b"OUTSIDE_MARK line\n\x1b]0;pwned\x07 title\n"
BENCH = b"import calc\nprint(calc.N)\nprint(0)  # TAMPER_MARK\n"


def in_repository(repo: Path, content: bytes) -> bool:
    """Whether an object of exactly this content is in the repository (loose or packed)."""
    digest = subprocess.run(
        ["git", "hash-object", "--stdin"], input=content, capture_output=True, check=True
    ).stdout.decode()
    return subprocess.run(["git", "cat-file", "-e", digest.strip()], cwd=repo).returncode == 0


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("refused")
    repo = script_campaign(tmp, SCRIPT, scope={"paths": ["calc.py", "data"], "max_file_mb": 2})
    before = snapshot(repo)
    run = subprocess.run(
        [sys.executable, "-m", "autoresearch", "run", "--plain"],
        cwd=repo,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert run.returncode != 0  # the tamper halts the campaign
    assert [r["status"] for r in ledger(repo, "t")] == [
        "baseline",
        "scope_violation",
        "edit_refused",
        "tampered",
    ]
    assert snapshot(repo) == before
    return repo


def test_diff_shows_a_scope_violation_marked_refused_and_escaped(
    refused: Path, invoke: Runner
) -> None:
    out = invoke(refused, "diff", "1")
    assert out.returncode == 0, out.stderr
    assert "REFUSED: attempt 1 (scope_violation) was not kept" in out.stdout
    assert "+++ b/notes.txt" in out.stdout and "+OUTSIDE_MARK line" in out.stdout
    assert "+N = 9" in out.stdout  # the in-scope part of the same candidate too
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "\\x1b]0;pwned\\x07 title" in out.stdout
    shown = invoke(refused, "show", "1")
    assert "REFUSED: attempt 1" in shown.stdout and "+OUTSIDE_MARK line" in shown.stdout
    assert "\x1b" not in shown.stdout
    data = json.loads(invoke(refused, "show", "1", "--json").stdout)
    assert "+OUTSIDE_MARK line" in data["refused_diff"]


def test_a_file_over_the_cap_is_named_with_its_size_never_shown(
    refused: Path, invoke: Runner
) -> None:
    for command in ("diff", "show"):
        out = invoke(refused, command, "2")
        assert out.returncode == 0, out.stderr
        assert "REFUSED: attempt 2 (edit_refused)" in out.stdout
        assert (
            "data/big.txt" in out.stdout
            and "not shown (before: absent; after: 3000000 bytes)" in out.stdout
        )
        assert "BIGFILE_MARK" not in out.stdout
    kept = (refused / ".autoresearch/t/refused/2.diff").read_text()
    assert "BIGFILE_MARK" not in kept and len(kept) < 1000


def test_a_harness_edit_shows_what_was_done_to_the_benchmark(refused: Path, invoke: Runner) -> None:
    out = invoke(refused, "diff", "3")
    assert "REFUSED: attempt 3 (tampered)" in out.stdout
    assert "--- a/bench.py" in out.stdout and "+print(0)  # TAMPER_MARK" in out.stdout
    assert " print(calc.N)" in out.stdout  # context from the version it was tried on


def test_no_object_of_the_refused_content_is_in_the_repository(refused: Path) -> None:
    for content in (NOTES, BENCH, b"N = 9\n"):
        assert not in_repository(refused, content)
    assert in_repository(refused, b"N = 10\n")  # the check itself sees what is there
    refs = git(refused, "for-each-ref", "--format=%(refname)", "refs/autoresearch/t")
    assert refs.split() == ["refs/autoresearch/t/0"]
    # kept beside the ledger instead, where no sandbox looks
    assert sorted(p.name for p in (refused / ".autoresearch/t/refused").iterdir()) == [
        "1.diff",
        "2.diff",
        "3.diff",
    ]


def test_a_kept_attempt_has_no_refused_mark(tmp_path: Path, invoke: Runner) -> None:
    repo = script_campaign(tmp_path, "sed -i 's/10/9/' calc.py; echo nine\n")
    invoke(repo, "run", "--plain")
    out = invoke(repo, "diff", "1")
    assert "REFUSED" not in out.stdout and "+N = 9" in out.stdout
    assert not (repo / ".autoresearch/t/refused").exists()


def test_the_kept_text_is_bounded_and_never_holds_a_binary_file(tmp_path: Path) -> None:
    from autoresearch.gitcmd import Git
    from autoresearch.testing.repo import make_repo
    from autoresearch.workspace import Change
    from autoresearch.workspace.refused import MAX_FILES_SHOWN, refused_diff

    repo = make_repo(tmp_path / "repo", {"a.txt": "one\n"})
    (repo / "blob.bin").write_bytes(b"BINARY_MARK\0" * 100)
    (repo / "a.txt").write_text("two\n" * 5000)
    (repo / "link").symlink_to("/etc/passwd")
    head = git(repo, "rev-parse", "HEAD").strip()
    names = [Change("A", "blob.bin"), Change("M", "a.txt"), Change("A", "link")]
    text = refused_diff(Git(repo), repo, head, names, limit=4096)
    assert "blob.bin: not shown (before: absent; after: binary, 1200 bytes)" in text
    assert "BINARY_MARK" not in text and "root:" not in text  # the link named, not followed
    assert len(text.encode()) < 4096 + 100 and text.endswith("cut here, at 4096 bytes\n")
    for i in range(MAX_FILES_SHOWN + 5):
        (repo / f"f{i}").write_text("x\n")
    flood = [Change("A", f"f{i}") for i in range(MAX_FILES_SHOWN + 5)]
    text = refused_diff(Git(repo), repo, head, flood)
    assert text.count("+++ b/f") == MAX_FILES_SHOWN and text.endswith(
        "5 more changed files, not shown\n"
    )
