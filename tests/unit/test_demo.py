"""`demo`'s refusals in-process, and the bundled examples' configs and READMEs."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoresearch.cli.demo import OFFLINE, available, examples_dir
from autoresearch.config import load_campaign
from conftest import Runner


@pytest.mark.parametrize(
    "args,needle",
    [
        (["nope"], "no example named 'nope'"),
        (["agent"], "needs a coding agent"),
    ],
)
def test_demo_refusals(tmp_path: Path, invoke: Runner, args: list[str], needle: str) -> None:
    result = invoke(tmp_path, "demo", *args, "--dir", str(tmp_path / "d"))
    assert result.returncode == 2 and needle in result.stderr


def test_demo_refuses_a_non_empty_folder(tmp_path: Path, invoke: Runner) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("mine")
    result = invoke(tmp_path, "demo", "--dir", str(tmp_path / "d"))
    assert result.returncode == 2 and "not empty" in result.stderr
    assert (tmp_path / "d" / "keep.txt").read_text() == "mine"


def test_every_example_has_a_valid_config_and_readme() -> None:
    names = available()
    assert set(OFFLINE) <= set(names) and "agent" in names
    for name in names:
        folder = examples_dir() / name
        assert (folder / "README.md").is_file()
        campaign = load_campaign(folder, folder / "autoresearch.toml")
        assert campaign.config.harness
