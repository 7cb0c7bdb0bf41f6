"""Read and rewrite one named value in a source or config file, leaving every other byte alone.

A parameter is addressed as `FILE:KEY`:
- `train.py:LR`: a module-level `LR = <literal>` (or `LR: float = <literal>`) in Python;
- `params.yaml:model.depth`, `conf.json:opt.lr`, `cfg.toml:train.epochs`: a dotted key.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Scalar = bool | int | float | str


class ParamError(ValueError):
    """The parameter cannot be found, read or written; the message says why."""


@dataclass(frozen=True)
class ParamRef:
    file: str
    key: str

    @classmethod
    def parse(cls, spec: str) -> ParamRef:
        file, sep, key = spec.rpartition(":")
        if not sep or not file or not key:
            raise ParamError(f"{spec!r} must look like 'FILE:NAME', e.g. 'train.py:LR'")
        if file.startswith("/") or ".." in Path(file).parts:
            raise ParamError(f"{spec!r} must name a file inside the repository")
        return cls(file=file, key=key)

    @property
    def kind(self) -> str:
        suffix = Path(self.file).suffix.lower()
        kinds = {".py": "python", ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}
        if suffix not in kinds:
            raise ParamError(
                f"{self.file}: cannot edit {suffix or 'extension-less'} files; use a .py, "
                ".yaml, .json or .toml file"
            )
        return kinds[suffix]

    def __str__(self) -> str:
        return f"{self.file}:{self.key}"


# -- Python -------------------------------------------------------------------------------


def _python_span(text: str, name: str) -> tuple[int, int, Any]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ParamError(f"is not valid Python ({exc.msg}, line {exc.lineno})") from None
    found: ast.expr | None = None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ) or (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and node.value is not None
        ):
            found = node.value
    if found is None:
        raise ParamError(f"has no module-level assignment '{name} = ...'")
    try:
        value = ast.literal_eval(found)
    except ValueError:
        raise ParamError(f"assigns {name} an expression, not a literal value") from None
    data = text.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    assert found.end_lineno is not None and found.end_col_offset is not None
    begin = starts[found.lineno - 1] + found.col_offset
    end = starts[found.end_lineno - 1] + found.end_col_offset
    # Convert byte offsets back to character offsets.
    return len(data[:begin].decode("utf-8")), len(data[:end].decode("utf-8")), value


def _python_literal(value: Scalar) -> str:
    return repr(value)


# -- YAML ---------------------------------------------------------------------------------

_YAML_KEY = re.compile(r"""(?P<q>["']?)(?P<key>[^:#"'\n]+?)(?P=q)\s*:(?=\s|$)""")


def _yaml_span(text: str, keys: list[str]) -> tuple[int, int]:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    start, stop, parent_indent = 0, len(lines), -1
    for depth, key in enumerate(keys):
        block_indent: int | None = None
        hit: int | None = None
        for i in range(start, stop):
            line = lines[i].rstrip("\r\n")
            body = line.lstrip(" ")
            if not body or body.startswith("#") or body in ("---", "..."):
                continue
            indent = len(line) - len(body)
            if indent <= parent_indent:
                stop = i
                break
            if block_indent is None:
                block_indent = indent
            if indent != block_indent:
                continue
            match = _YAML_KEY.match(body)
            if match and match.group("key").strip() == key:
                hit = i
                break
        if hit is None or block_indent is None:
            raise ParamError(f"has no key '{'.'.join(keys[: depth + 1])}'")
        if depth < len(keys) - 1:
            start, parent_indent = hit + 1, block_indent
            continue
        line = lines[hit].rstrip("\r\n")
        body = line.lstrip(" ")
        match = _YAML_KEY.match(body)
        assert match is not None
        col = len(line) - len(body) + match.end()
        rest = line[col:]
        value_start = col + (len(rest) - len(rest.lstrip(" \t")))
        comment = re.search(r"\s+#", line[value_start:])
        value_end = value_start + comment.start() if comment else len(line.rstrip(" \t"))
        if value_end <= value_start:
            raise ParamError(f"key '{'.'.join(keys)}' holds a block, not a single value")
        return offsets[hit] + value_start, offsets[hit] + value_end
    raise ParamError("empty key")


def _yaml_literal(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"  # YAML 1.1 floats need a dot
        return text
    if isinstance(value, int):
        return str(value)
    return _yaml_quoted(value)


def _yaml_quoted(text: str) -> str:
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable() and not 0xD800 <= ord(ch) < 0xE000:
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


# -- JSON ---------------------------------------------------------------------------------


def _json_span(text: str, keys: list[str]) -> tuple[int, int]:
    decoder = json.JSONDecoder()
    ws = re.compile(r"[ \t\r\n]*")

    def skip(i: int) -> int:
        m = ws.match(text, i)
        return m.end() if m else i

    i = skip(0)
    for depth, key in enumerate(keys):
        if i >= len(text) or text[i] != "{":
            raise ParamError(f"has no object at '{'.'.join(keys[:depth]) or '(top)'}'")
        i = skip(i + 1)
        while True:
            if i < len(text) and text[i] == "}":
                raise ParamError(f"has no key '{'.'.join(keys[: depth + 1])}'")
            try:
                name, i = decoder.raw_decode(text, i)
            except json.JSONDecodeError as exc:
                raise ParamError(f"is not valid JSON ({exc.msg})") from None
            i = skip(i)
            if i >= len(text) or text[i] != ":":
                raise ParamError("is not valid JSON (expected ':')")
            i = skip(i + 1)
            if name == key:
                break
            try:
                _, i = decoder.raw_decode(text, i)
            except json.JSONDecodeError as exc:
                raise ParamError(f"is not valid JSON ({exc.msg})") from None
            i = skip(i)
            if i < len(text) and text[i] == ",":
                i = skip(i + 1)
    try:
        value, end = decoder.raw_decode(text, i)
    except json.JSONDecodeError as exc:
        raise ParamError(f"is not valid JSON ({exc.msg})") from None
    if isinstance(value, dict | list):
        raise ParamError(f"key '{'.'.join(keys)}' holds an object or list, not a single value")
    return i, end


# -- TOML ---------------------------------------------------------------------------------


def _toml_container(text: str, keys: list[str]) -> tuple[Any, Any]:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        doc = tomlkit.parse(text)
    except ParseError as exc:
        raise ParamError(f"is not valid TOML ({exc})") from None
    node: Any = doc
    for depth, key in enumerate(keys[:-1]):
        if not hasattr(node, "get") or key not in node:
            raise ParamError(f"has no table '{'.'.join(keys[: depth + 1])}'")
        node = node[key]
    if not hasattr(node, "get") or keys[-1] not in node:
        raise ParamError(f"has no key '{'.'.join(keys)}'")
    return doc, node


# -- public API ---------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Unwrap tomlkit items into plain Python values."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def read_param(text: str, ref: ParamRef) -> Any:
    """The current value of `ref` in `text`."""
    kind = ref.kind
    keys = ref.key.split(".")
    if kind == "python":
        return _python_span(text, ref.key)[2]
    if kind == "yaml":
        import yaml

        start, end = _yaml_span(text, keys)
        try:
            return yaml.safe_load(text[start:end])
        except yaml.YAMLError as exc:
            raise ParamError(f"key '{ref.key}' has a value YAML cannot read ({exc})") from None
    if kind == "json":
        start, end = _json_span(text, keys)
        return json.loads(text[start:end])
    _, container = _toml_container(text, keys)
    value = _plain(container[keys[-1]])
    if isinstance(value, dict | list):
        raise ParamError(f"key '{ref.key}' holds a table or array, not a single value")
    return value


def write_param(text: str, ref: ParamRef, value: Scalar) -> str:
    """`text` with only the value of `ref` replaced by `value`."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ParamError(f"cannot write the non-finite value {value} to {ref}")
    kind = ref.kind
    keys = ref.key.split(".")
    if kind == "python":
        start, end, _ = _python_span(text, ref.key)
        new = text[:start] + _python_literal(value) + text[end:]
    elif kind == "yaml":
        start, end = _yaml_span(text, keys)
        new = text[:start] + _yaml_literal(value) + text[end:]
    elif kind == "json":
        start, end = _json_span(text, keys)
        new = text[:start] + json.dumps(value) + text[end:]
    else:
        import tomlkit

        doc, container = _toml_container(text, keys)
        container[keys[-1]] = value
        new = tomlkit.dumps(doc)
    written = read_param(new, ref)
    if written != value or type(written) is not type(value):
        raise ParamError(f"rewriting {ref} did not round-trip ({value!r} read back as {written!r})")
    return new


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value) if isinstance(value, str) else str(value)
