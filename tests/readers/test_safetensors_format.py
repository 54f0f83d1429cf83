"""The safetensors header rules shared by the local and the Hub reader: each rule refuses a file that breaks it,
with one line that names the tensor or the byte counts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save

from qkgeometry.errors import SourceError
from qkgeometry.readers.safetensors_format import header_length, parse_header


def split(blob: bytes) -> tuple[bytes, int]:
    n = int.from_bytes(blob[:8], "little")
    return blob[8:8 + n], len(blob)


def rewrite(blob: bytes, edit) -> bytes:
    raw, _ = split(blob)
    header = json.loads(raw)
    edit(header)
    new = json.dumps(header).encode()
    new += b" " * (-len(new) % 8)
    return len(new).to_bytes(8, "little") + new + blob[8 + len(raw):]


@pytest.fixture
def blob():
    return save({"q": np.arange(12, dtype=np.float32).reshape(3, 4), "k": np.ones((2, 4), np.float32)})


def test_a_valid_file_parses(blob):
    raw, size = split(blob)
    entries = parse_header(raw, size, "f")
    assert set(entries) == {"q", "k"} and header_length(blob[:8], size, "f") == len(raw)


@pytest.mark.parametrize("case, message", [
    ("trailing", r"has 8 trailing bytes"),
    ("past_end", r"ends early|needs 48 bytes"),
    ("overlap", r"overlaps the tensor before it"),
    ("gap", r"leaves a gap"),
    ("dtype", r"not a tensor"),
    ("list", r"not an object of tensors"),
    ("length", r"cannot hold"),
])
def test_each_rule_refuses_its_file(blob, case, message):
    if case == "trailing":
        bad = blob + b"\0" * 8
    elif case == "past_end":
        bad = rewrite(blob, lambda h: h["q"].update(data_offsets=[h["q"]["data_offsets"][0],
                                                                   h["q"]["data_offsets"][1] + 400]))
    elif case == "overlap":
        bad = rewrite(blob, lambda h: (h["k"].update(data_offsets=[0, 32]), h["q"].update(data_offsets=[16, 64])))
    elif case == "gap":
        bad = rewrite(blob, lambda h: h["k"].update(data_offsets=[4, 36]) if h["k"]["data_offsets"][0] == 0
                      else h["q"].update(data_offsets=[4, 52]))
    elif case == "dtype":
        bad = rewrite(blob, lambda h: h["q"].update(dtype="Q4"))
    elif case == "list":
        raw = b"[1, 2]   "
        bad = len(raw).to_bytes(8, "little") + raw
    else:
        bad = (10**9).to_bytes(8, "little") + blob[8:]
    with pytest.raises(SourceError, match=message) as info:
        raw, size = split(bad)
        header_length(bad[:8], size, "file 'x.safetensors'")
        parse_header(raw, size, "file 'x.safetensors'")
    assert "\n" not in str(info.value) and "'x.safetensors'" in str(info.value)
