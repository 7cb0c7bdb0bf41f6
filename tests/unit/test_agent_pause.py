"""`pause`: every process of a sandboxed agent held still while the engine works on its
workspace, and nothing else. Real process trees: a beating loop, a process that forks
all the time, a process beside the tree."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from autoresearch.agent.pause import Root, paused, resume, stop

TREE = """
( while :; do date +%s%N >> {beats}; sleep 0.02; done ) &
( while :; do ( sleep 0.01 ) & sleep 0.005; done ) &
wait
"""


def grows(path: Path, seconds: float = 0.3) -> bool:
    before = path.read_text() if path.exists() else ""
    time.sleep(seconds)
    return (path.read_text() if path.exists() else "") != before


def group_states(group: int) -> list[str]:
    """The states of the processes of a process group but its leader."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == group:
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == group:
            found.append(fields[0])
    return found


def test_the_tree_is_held_still_and_let_go(tmp_path: Path) -> None:
    beats, beside = tmp_path / "beats", tmp_path / "beside"
    tree = subprocess.Popen(["bash", "-c", TREE.format(beats=beats)], start_new_session=True)
    other = subprocess.Popen(
        ["bash", "-c", f"while :; do date +%s%N >> {beside}; sleep 0.02; done"],
        start_new_session=True,
    )
    try:
        time.sleep(0.3)
        root = Root.of(tree.pid)
        assert root is not None
        with paused(root):
            time.sleep(0.1)  # a beat written before the stop lands
            assert not grows(beats)
            assert grows(beside)  # a process outside the tree runs on
            held = group_states(tree.pid)
            assert len(held) >= 2 and set(held) <= {"T", "t", "Z"}, held
        assert grows(beats)
        # A pid that is not the sandbox's any more (its start time differs): nothing.
        stranger = Root(tree.pid, root.started + 1)
        stop(stranger)
        assert grows(beats)
        resume(stranger)
    finally:
        for proc in (tree, other):
            os.killpg(proc.pid, 9)
            proc.wait()


def test_without_a_sandbox_nothing_is_paused(tmp_path: Path) -> None:
    with paused(None):
        pass


def test_two_sessions_pauses_take_turns(tmp_path: Path) -> None:
    """A second `step` (another MCP session) waits for the first: the end of one cannot
    let the agent run while the other still works."""
    import threading

    beats = tmp_path / "beats"
    tree = subprocess.Popen(["bash", "-c", TREE.format(beats=beats)], start_new_session=True)
    lock = tmp_path / "pause.lock"
    seen: list[str] = []
    try:
        time.sleep(0.2)
        root = Root.of(tree.pid)
        first_in = threading.Event()

        def second() -> None:
            first_in.wait()
            with paused(root, lock):
                seen.append("second in")
            seen.append("second out")

        other = threading.Thread(target=second)
        other.start()
        with paused(root, lock):
            first_in.set()
            time.sleep(0.3)
            assert seen == [] and not grows(beats)
            seen.append("first out")
        other.join()
        assert seen == ["first out", "second in", "second out"]
        assert grows(beats)
    finally:
        os.killpg(tree.pid, 9)
        tree.wait()
