"""Public functions given odd Python input answer with one line naming the argument: ragged lists, object arrays,
a NUL byte in a path, a frame without score columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import qkgeometry as qg
from qkgeometry.errors import SourceError

RAGGED = [[1.0, 2.0], [3.0]]


@pytest.mark.parametrize("call, name", [
    (lambda: qg.symmetry_score(RAGGED), "M"),
    (lambda: qg.directionality_score(RAGGED), "M"),
    (lambda: qg.decompose(RAGGED), "M"),
    (lambda: qg.symmetry_score_factored(RAGGED, [[1.0], [2.0]]), "A"),
    (lambda: qg.layer_scores([RAGGED], [RAGGED]), "wq"),
])
def test_a_ragged_list_is_named_not_a_numpy_shape_error(call, name):
    with pytest.raises(ValueError, match=rf"`{name}` could not be read as an array: it is a ragged"):
        call()


def test_object_arrays_in_layer_scores_are_refused_by_name():
    wq = np.array([[[1.0, "a"], [2.0, 3.0]]], dtype=object)
    with pytest.raises(TypeError, match=r"`wq` could not be read as a numeric array \(got dtype=object\)"):
        qg.layer_scores(wq, np.ones((1, 2, 2)))


@pytest.mark.parametrize("path", ["model\x00.gguf", "/tmp/a\x00b", "offline:mini\x00lm"])
def test_load_qk_refuses_a_nul_byte_in_a_path(path):
    with pytest.raises(SourceError, match="NUL byte"):
        qg.load_qk(path)


def test_summarize_names_the_missing_score_columns():
    with pytest.raises(ValueError, match=r"`frame` lacks the column\(s\) \['symmetry', 'directionality'\]"):
        qg.summarize(pd.DataFrame({"model": ["m"], "family": ["encoder"], "component": ["self"]}))
    with pytest.raises(TypeError, match="`frame` must be a pandas DataFrame"):
        qg.summarize([{"model": "m"}])


def test_summarize_gives_median_and_quartiles_per_model_and_component():
    frame = pd.DataFrame({"model": ["a"] * 5 + ["b"] * 2, "family": "encoder", "component": "self",
                          "symmetry": [0.1, 0.2, 0.3, 0.4, 0.5, -0.5, 0.5], "directionality": 0.0})
    summary = qg.summarize(frame).set_index("model")
    assert summary.loc["a", "n"] == 5 and summary.loc["b", "n"] == 2
    assert summary.loc["a", ["symmetry_median", "symmetry_q25", "symmetry_q75"]].tolist() == pytest.approx(
        [0.3, 0.2, 0.4])
    assert summary.loc["b", ["symmetry_q25", "symmetry_q75"]].tolist() == pytest.approx([-0.25, 0.25])


def _sparse_inputs():
    import scipy.sparse
    import torch

    rng = np.random.default_rng(0)
    dense = rng.standard_normal((6, 6))
    return [("coo", torch.from_numpy(dense).to_sparse()), ("csr", torch.from_numpy(dense).to_sparse_csr()),
            ("scipy", scipy.sparse.csr_matrix(dense))]


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("kind", ["coo", "csr", "scipy"])
def test_sparse_matrices_are_refused_by_name(kind):
    import re

    import torch

    sparse = dict(_sparse_inputs())[kind]
    hint = "toarray()" if kind == "scipy" else "to_dense()"
    calls = [(lambda: qg.symmetry_score(sparse), "M"), (lambda: qg.directionality_score(sparse), "M"),
             (lambda: qg.decompose(sparse), "M"),
             (lambda: qg.symmetry_score_factored(sparse, np.ones((6, 6))), "A")]
    if kind != "scipy":
        calls.append((lambda: qg.layer_scores(sparse.to_dense()[None].to_sparse(), torch.ones(1, 6, 6)), "wq"))
    for call, name in calls:
        with pytest.raises(TypeError, match=rf"`{name}` is a (SciPy )?sparse .*{re.escape(hint)}"):
            call()
