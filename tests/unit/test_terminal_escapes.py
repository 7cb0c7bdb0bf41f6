"""Nothing raw reaches a terminal: a candidate whose files, file names, description and
crash output carry terminal sequences (OSC 52 to the clipboard, a window title, a screen
clear, a bare ESC, BEL and CR, C1 controls as characters and as raw bytes) is printed by
every command as text: no byte of 0x00-0x1f but newline and tab, no 0x7f, no C1 code point.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoresearch.views.render import printable, printable_chunks
from campaigns import script_campaign
from conftest import ledger

# Written by the proposer with printf, so every byte is exactly this.
HOSTILE = r"\033]52;c;ZXZpbA==\007 \033]0;owned\007 \033[2J \033 bare \007 bell \r cr \302\233 c1"
RAW = r"\377\233\033[31m"  # not UTF-8: a raw C1 CSI and a colour
# A description is one line: the same without the CR that would end it.
ONE_LINE = HOSTILE.replace(r"\r cr ", "")

PROPOSER = rf"""
case "$AUTORESEARCH_ITERATION" in
  1)
    echo 'N = 9' > calc.py
    printf 'hello {HOSTILE}\n{RAW}\n' > "notes-$(printf '\033[2J')-x.txt"
    printf '{ONE_LINE} the description\n'
    ;;
  2)
    cat > calc.py <<'PY'
import sys
sys.stderr.write("\x1b]52;c;ZXZpbA==\x07 \x1b]0;owned\x07 \x1b[2J \x1b bare \r cr \x9b c1\n")
raise SystemExit(3)
PY
    printf 'crash {ONE_LINE}\n'
    ;;
esac
"""


def forbidden(text: str) -> list[str]:
    return sorted(
        {c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F}
    )


def clean(out: bytes) -> str:
    """The output as a terminal gets it: valid UTF-8 (a stray byte could be a C1 control to
    the terminal) without a control character."""
    text = out.decode("utf-8")
    assert forbidden(text) == [], text
    return text


def autoresearch(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "autoresearch", *args],
        cwd=repo,
        capture_output=True,
        timeout=120,
        env=env,
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    repo = script_campaign(tmp, PROPOSER, scope=["calc.py", "notes-*"])
    run = autoresearch(repo, "run", "--plain", "--max-iterations", "2")
    assert run.returncode == 0, run.stderr
    clean(run.stdout), clean(run.stderr)
    records = ledger(repo, "t")
    assert [r["status"] for r in records] == ["baseline", "keep", "crash"]
    assert "\x1b]52" in str(records[1]["description"])  # the ledger keeps the text as it is
    return repo


@pytest.mark.parametrize(
    "args",
    [["diff", "1"], ["diff", "2"], ["diff"], ["show", "1"], ["show", "2"], ["log"], ["status"]],
)
def test_no_command_prints_a_control_character(hostile: Path, args: list[str]) -> None:
    done = autoresearch(hostile, *args)
    assert done.returncode == 0, done.stderr
    text = clean(done.stdout)
    clean(done.stderr)
    # The sequences are there, shown as text: the check above did not pass on nothing.
    if args[0] == "diff" or args == ["show", "1"]:
        assert "\\x1b]52;c;ZXZpbA==\\x07" in text
    if args[0] == "diff" and args[1:] != ["2"]:
        assert "\\xff\\x9b\\x1b[31m" in text and "\\x9b c1" in text
    if args == ["show", "2"]:
        assert "\\x1b]0;owned\\x07" in text and "cr \\x9b c1" in text  # its stderr


def test_an_error_naming_candidate_content_is_escaped(hostile: Path) -> None:
    # A failed attempt is refused with its reason: the crash's output, the candidate's.
    done = autoresearch(hostile, "branch", "x", "--attempt", "2")
    assert done.returncode == 1
    assert "crash: metric exited with code 3: cr \\x9b c1" in clean(done.stderr)


def test_the_escaper_shows_every_control_as_text() -> None:
    assert printable("a\x1b[2Jb\x07\r\x9b\x85\x7f", one_line=False) == (
        "a\\x1b[2Jb\\x07\\x0d\\x9b\\x85\\x7f"
    )
    assert printable("x\udc9by") == "x\\x9by"  # a byte that was not UTF-8
    assert printable("line\n\ttab", one_line=False) == "line\n\ttab"
    # A character cut between two pieces of a stream is decoded whole.
    pieces = list(printable_chunks([b"caf\xc3", b"\xa9 \x1b]52;c;x\x07\n"]))
    assert "".join(pieces) == "café \\x1b]52;c;x\\x07\n"
