"""qkgeometry.score_table: one model's scores without pandas, the same numbers as score_model and summarize, and the
command line's fast path that imports neither pandas nor the survey package."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import qkgeometry as qg
from qkgeometry.score_table import model_rows, summary_rows, summary_table
from tiny_models import tiny_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_folder("llama", tmp_path_factory.mktemp("m") / "llama", hidden_size=32, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, intermediate_size=32, vocab_size=64,
                       max_position_embeddings=16)


@pytest.mark.parametrize("per", ["layer", "head"])
def test_the_rows_and_their_summary_are_score_model_and_summarize(folder, per):
    with qg.load_qk(folder) as model:
        rows = model_rows(model, per)
    frame = qg.score_model(folder, per=per)
    np.testing.assert_array_equal([r["symmetry"] for r in rows], frame["symmetry"].to_numpy())
    np.testing.assert_array_equal([r["directionality"] for r in rows], frame["directionality"].to_numpy())
    ours, theirs = summary_rows(rows), qg.summarize(frame).to_dict("records")
    assert len(ours) == len(theirs) == 1
    for key, value in ours[0].items():
        assert value == pytest.approx(theirs[0][key], abs=1e-15), key
    assert summary_table(ours) == summary_table(theirs)


def test_score_of_a_local_model_imports_neither_pandas_nor_the_survey_package(folder):
    """`qkgeometry score FOLDER` prints six numbers per stack: it must start about as fast as numpy imports, so it
    loads neither pandas nor qkgeometry.surveying (`qkgeometry score ... --out` still writes the tidy CSV)."""
    code = ("import sys\nfrom qkgeometry.cli import main\nassert main(['score', sys.argv[1]]) == 0\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'pandas' or m.startswith('qkgeometry.surveying'))\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "scores are median [q25, q75]" in out.stdout
    assert "HEAVY []" in out.stdout, out.stdout.splitlines()[-1]
