"""Glob matching for scope, harness and share."""

from __future__ import annotations

import pytest

from autoresearch.scope import PathMatcher


@pytest.mark.parametrize(
    "patterns,path,expected",
    [
        (["calc.py"], "calc.py", True),
        (["calc.py"], "sub/calc.py", False),
        (["src/**/*.py"], "src/a.py", True),
        (["src/**/*.py"], "src/x/y/a.py", True),
        (["src/**/*.py"], "src/a.txt", False),
        (["src"], "src/deep/file", True),
        (["src/"], "src/deep/file", True),
        (["src"], "srcx/file", False),
        (["*.py"], "a.py", True),
        (["*.py"], "d/a.py", False),
        (["**/*.py"], "d/e/a.py", True),
        (["**/*.py"], "a.py", True),
        (["data_?.csv"], "data_1.csv", True),
        (["[ab].txt"], "b.txt", True),
        (["[!ab].txt"], "c.txt", True),
        (["./calc.py"], "calc.py", True),
        ([".github/**"], ".github/workflows/x.yml", True),
    ],
)
def test_path_matcher(patterns: list[str], path: str, expected: bool) -> None:
    assert PathMatcher(patterns).matches(path) is expected
