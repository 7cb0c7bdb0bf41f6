"""Writing and removing the engine's own files when a command left traps in its folders:
links on the way, folders too deep for Python, folders nothing may remove."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch.errors import AutoresearchError
from autoresearch.isolation.owned import real_parents, remove, write_file


def test_a_write_lands_inside_its_folder_whatever_was_planted_on_the_way(
    tmp_path: Path,
) -> None:
    folder, outside = tmp_path / "measure", tmp_path / "users"
    (folder / "rows").mkdir(parents=True)
    outside.mkdir()
    (outside / "holdout.csv").write_text("the user's file\n")
    (folder / "data").symlink_to(outside)  # a link where a folder is written
    (folder / "rows" / "more").write_text("a file where a folder is written\n")
    for rel in ("data/holdout.csv", "rows/more/holdout.csv"):
        target = real_parents(folder, rel)
        write_file(target, b"rows\n")
        assert target.resolve().is_relative_to(folder.resolve())
        assert (folder / rel).read_bytes() == b"rows\n"
    assert (outside / "holdout.csv").read_text() == "the user's file\n"


def test_a_folder_nested_past_the_recursion_limit_is_removed(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    subprocess.run(["mkdir", "-p", str(deep / ("d/" * 1100))], check=True)
    remove(deep)
    assert not deep.exists()


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a file nobody may remove (`chattr +i`), released afterwards."""
    folder = tmp_path / "stuck"
    folder.mkdir()
    (folder / "f").write_text("x\n")
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    if subprocess.run(["chattr", "+i", str(folder / "f")], capture_output=True).returncode:
        pytest.skip("this file system or user cannot make a file immutable")
    yield folder
    subprocess.run(["chattr", "-i", str(folder / "f")], capture_output=True)


def test_a_folder_that_cannot_be_removed_is_one_sentence(immutable: Path) -> None:
    with pytest.raises(AutoresearchError, match=r"^cannot remove .*stuck.*remove it by hand"):
        remove(immutable)
    assert (immutable / "f").exists()  # nothing else was done to it


@pytest.mark.parametrize("planted", ["link", "folder link"])
def test_a_metric_file_is_read_only_inside_the_folder_the_command_ran_in(
    tmp_path: Path, planted: str
) -> None:
    """The engine reads metric files outside the sandbox: a link planted at one (or at a
    folder on its way) must not make it read the user's .env."""
    from autoresearch.config.criteria import SecondaryMetric
    from autoresearch.measure.metrics import read_one
    from autoresearch.measure.readout import MetricParseError, read_metric

    folder, home = tmp_path / "measure", tmp_path / "user"
    folder.mkdir()
    home.mkdir()
    (home / "mem.json").write_text('{"mem": 31337}\n')
    if planted == "link":
        (folder / "mem.json").symlink_to(home / "mem.json")
        rel = "mem.json"
    else:
        (folder / "out").symlink_to(home)
        rel = "out/mem.json"
    metric = SecondaryMetric(name="mem", file=rel, key="mem")
    with pytest.raises(MetricParseError, match="link out of the folder"):
        read_one(metric, "", folder, 1.0)
    with pytest.raises(MetricParseError, match="link out of the folder"):
        read_metric(metric, "", folder, 1.0)
    # A link that stays inside the folder is read as the file it names.
    (folder / "runs").mkdir()
    (folder / "runs" / "last.json").write_text('{"mem": 12}\n')
    (folder / "latest.json").symlink_to(folder / "runs" / "last.json")
    assert (
        read_one(SecondaryMetric(name="mem", file="latest.json", key="mem"), "", folder, 1.0) == 12
    )
