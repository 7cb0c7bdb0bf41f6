"""Rewriting one named value in Python, YAML, JSON and TOML files, byte for byte otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoresearch.proposers.params import ParamError, ParamRef, read_param, write_param

PY = '''"""Training script."""
import os

# Learning rate, tuned by hand.
LR = 3e-4  # do not go above 1e-2
BATCH: int = 32
OPTIM = "adam"
USE_AMP = False
NEG = -5
π = 3.14  # unicode name
LR_SCHEDULE = {"warmup": 10}

def train():
    LR = 1  # local, not the module-level one
    return LR
'''

YAML = """# model settings
model:
  depth: 4   # layers
  width: 128
  name: "resnet"
optim:
  lr: 0.001
  kind: adam
  nested:
    deep: 1
depth: 99
"""

JSON = """{
  "model": {"depth": 4, "width": 128},
  "optim": {
    "lr": 0.001,
    "name": "adam"
  },
  "depth": 99
}
"""

TOML = """# config
[model]
depth = 4   # layers
name = "x"

[train]
lr = 1e-3 # rate
epochs = 10
"""


def only_changed(before: str, after: str, old: str, new: str) -> None:
    """The rewrite replaced exactly one occurrence of `old` with `new`, nothing else."""
    candidates = [
        before[:k] + new + before[k + len(old) :]
        for k in range(len(before))
        if before.startswith(old, k)
    ]
    assert after in candidates, after


@pytest.mark.parametrize(
    "key,old_value,new_value,old_text,new_text",
    [
        ("LR", 3e-4, 1e-3, "3e-4", "0.001"),
        ("BATCH", 32, 64, "32", "64"),
        ("OPTIM", "adam", "sgd", '"adam"', "'sgd'"),
        ("USE_AMP", False, True, "False", "True"),
        ("NEG", -5, 7, "-5", "7"),
        ("π", 3.14, 2.5, "3.14", "2.5"),
    ],
)
def test_python(
    key: str, old_value: object, new_value: object, old_text: str, new_text: str
) -> None:
    ref = ParamRef.parse(f"train.py:{key}")
    assert read_param(PY, ref) == old_value
    out = write_param(PY, ref, new_value)  # type: ignore[arg-type]
    assert read_param(out, ref) == new_value
    only_changed(PY, out, old_text, new_text)


@pytest.mark.parametrize(
    "key,old_value,new_value,old_text,new_text",
    [
        ("model.depth", 4, 8, "4", "8"),
        ("model.name", "resnet", "vit", '"resnet"', '"vit"'),
        ("optim.lr", 0.001, 1e-05, "0.001", "1.0e-05"),
        ("optim.nested.deep", 1, 2, "1", "2"),
        ("depth", 99, 3, "99", "3"),
    ],
)
def test_yaml(key: str, old_value: object, new_value: object, old_text: str, new_text: str) -> None:
    ref = ParamRef.parse(f"params.yaml:{key}")
    assert read_param(YAML, ref) == old_value
    out = write_param(YAML, ref, new_value)  # type: ignore[arg-type]
    only_changed(YAML, out, old_text, new_text)


@pytest.mark.parametrize(
    "key,old_value,new_value,old_text,new_text",
    [
        ("model.depth", 4, 8, "4", "8"),
        ("optim.lr", 0.001, 0.5, "0.001", "0.5"),
        ("optim.name", "adam", "sgd", '"adam"', '"sgd"'),
        ("depth", 99, 1, "99", "1"),
    ],
)
def test_json(key: str, old_value: object, new_value: object, old_text: str, new_text: str) -> None:
    ref = ParamRef.parse(f"conf.json:{key}")
    assert read_param(JSON, ref) == old_value
    out = write_param(JSON, ref, new_value)  # type: ignore[arg-type]
    only_changed(JSON, out, old_text, new_text)


@pytest.mark.parametrize(
    "key,old_value,new_value,old_text,new_text",
    [
        ("model.depth", 4, 8, "4", "8"),
        ("train.lr", 1e-3, 0.01, "1e-3", "0.01"),
        ("model.name", "x", "y", '"x"', '"y"'),
    ],
)
def test_toml(key: str, old_value: object, new_value: object, old_text: str, new_text: str) -> None:
    ref = ParamRef.parse(f"cfg.toml:{key}")
    assert read_param(TOML, ref) == old_value
    out = write_param(TOML, ref, new_value)  # type: ignore[arg-type]
    only_changed(TOML, out, old_text, new_text)
    assert "# layers" in out and "# rate" in out


@pytest.mark.parametrize(
    "spec,text,message",
    [
        ("train.py:MISSING", PY, "no module-level assignment"),
        ("train.py:LR_SCHEDULE", PY, None),
        ("train.py:X", "X = os.getenv('x')\n", "not a literal"),
        ("train.py:X", "def (:\n", "not valid Python"),
        ("p.yaml:model.missing", YAML, "no key 'model.missing'"),
        ("p.yaml:model", YAML, "holds a block"),
        ("p.json:model", JSON, "object or list"),
        ("p.json:nope.x", JSON, "no key 'nope'"),
        ("p.json:x", "{not json", "not valid JSON"),
        ("c.toml:model.nope", TOML, "no key 'model.nope'"),
        ("c.toml:nope.x", TOML, "no table 'nope'"),
        ("c.toml:x", "= =", "not valid TOML"),
    ],
)
def test_read_errors(spec: str, text: str, message: str | None) -> None:
    ref = ParamRef.parse(spec)
    if message is None:
        assert read_param(text, ref) == {"warmup": 10}
        return
    with pytest.raises(ParamError, match=message):
        read_param(text, ref)


@pytest.mark.parametrize("spec", ["noseparator", ":X", "a.py:", "/etc/x.py:X", "../x.py:X"])
def test_bad_refs(spec: str) -> None:
    with pytest.raises(ParamError):
        ParamRef.parse(spec)


def test_unsupported_extension() -> None:
    with pytest.raises(ParamError, match=r"cannot edit \.ini"):
        read_param("x=1", ParamRef.parse("a.ini:x"))


@given(
    st.one_of(
        st.integers(-(10**6), 10**6),
        st.floats(allow_nan=False, allow_infinity=False, width=64),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
    )
)
def test_round_trip_any_value(value: int | float | str) -> None:
    for spec, text in (
        ("t.py:LR", PY),
        ("p.yaml:optim.lr", YAML),
        ("c.json:optim.lr", JSON),
        ("c.toml:train.lr", TOML),
    ):
        ref = ParamRef.parse(spec)
        out = write_param(text, ref, value)
        assert read_param(out, ref) == value
