"""Chapters 1-2's figures draw what their docstrings say: the right data, on the right scale, in the right panels."""
from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

from qkgeometry import decompose, plotting


def test_matrix_triptych_shows_m_and_its_parts_on_one_zero_centred_scale():
    M = np.random.default_rng(0).normal(size=(6, 6))
    fig = plotting.matrix_triptych(M)
    images = [ax.get_images()[0] for ax in fig.axes[:3]]
    Ms, Mn = decompose(M)
    for image, expected in zip(images, (M, Ms, Mn)):
        np.testing.assert_allclose(image.get_array(), expected, rtol=0, atol=1e-12)
        lo, hi = image.get_clim()
        assert lo == -hi and hi == images[0].get_clim()[1]
    assert plotting.matrix_triptych(M, max_dim=3).axes[0].get_images()[0].get_array().shape == (3, 3)


def _offsets(collection) -> np.ndarray:
    return np.asarray(collection.get_offsets(), dtype=float)


def test_score_plane_draws_each_model_and_the_null_cloud_at_their_scores():
    frame = pd.DataFrame({"model": ["enc", "enc", "dec"], "family": ["encoder", "encoder", "decoder"],
                          "symmetry": [0.5, 0.4, -0.1], "directionality": [0.1, 0.0, -0.6]})
    null = pd.DataFrame({"symmetry": [0.01, -0.02, 0.03], "directionality": [0.2, -0.1, 0.0]})
    ax = plotting.score_plane(frame, null=null).axes[0]
    cloud, enc, dec = ax.collections
    np.testing.assert_allclose(_offsets(cloud), null[["symmetry", "directionality"]].to_numpy())
    np.testing.assert_allclose(_offsets(enc), [[0.5, 0.1], [0.4, 0.0]])
    np.testing.assert_allclose(_offsets(dec), [[-0.1, -0.6]])
    assert matplotlib.colors.to_hex(enc.get_facecolor()[0]) == plotting.FAMILY_COLORS["encoder"]
    assert matplotlib.colors.to_hex(dec.get_facecolor()[0]) == plotting.FAMILY_COLORS["decoder"]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[1:] == ["enc (encoder)", "dec (decoder)"]
    assert ax.get_xlim() == (-1.1, 1.1) and ax.get_ylim() == (-1.1, 1.1)  # margin: points at ±1 stay whole


def test_null_spread_draws_the_median_and_quantile_band_per_d_and_rank():
    null = pd.DataFrame({"d": [4] * 5 + [8] * 5 + [8] * 5, "r": [2] * 10 + [4] * 5,
                         "symmetry": [0.0, 0.1, 0.2, 0.3, 0.4, 1.0, 1.1, 1.2, 1.3, 1.4, -1.0, -0.5, 0.0, 0.5, 1.0],
                         "directionality": np.zeros(15)})
    fig = plotting.null_spread(null, quantiles=(0.25, 0.75))
    ax = fig.axes[0]
    rank2, rank4 = ax.containers  # one errorbar per rank
    line2 = rank2.lines[0]
    np.testing.assert_allclose(np.asarray(line2.get_ydata(), float), [0.2, 1.2])  # medians at d = 4 and d = 8
    np.testing.assert_allclose(np.asarray(line2.get_xdata(), float) / [4, 8], 1 - 0.02)  # dodged left of d
    segments = rank2.lines[2][0].get_segments()
    np.testing.assert_allclose([s[:, 1] for s in segments], [[0.1, 0.3], [1.1, 1.3]])  # 25%-75% band
    np.testing.assert_allclose(np.asarray(rank4.lines[0].get_ydata(), float), [0.0])
    assert ax.get_xscale() == "log" and "25–75% band" in ax.get_title()


def test_heads_vs_layers_draws_every_head_and_the_layer_score_per_model():
    heads = pd.DataFrame({"model": ["m"] * 4, "layer": [0, 0, 1, 1], "head": [0, 1, 0, 1],
                          "symmetry": [0.1, 0.3, -0.2, 0.0]})
    layers = pd.DataFrame({"model": ["m", "m"], "family": ["encoder"] * 2, "layer": [0, 1], "symmetry": [0.5, -0.4]})
    ax = plotting.heads_vs_layers(heads, layers, null_band={"m": (-0.05, 0.05)}).axes[0]
    dots, diamonds = ax.collections[-2:]
    np.testing.assert_allclose(_offsets(dots), [[0, 0.1], [0, 0.3], [1, -0.2], [1, 0.0]])
    np.testing.assert_allclose(_offsets(diamonds), [[0, 0.5], [1, -0.4]])
    (band,) = ax.patches  # the null band, drawn across the panel
    assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((-0.05, 0.05))
    assert ax.get_title() == "m (encoder)"


def test_heads_vs_layers_names_each_model_as_a_reader_knows_it():
    """A panel is titled by the model's name ("all-MiniLM-L6-v2"), never by how it was read ("offline:minilm-l6"),
    and the same name whether the weights came offline or from the Hub."""
    for source in ("offline:minilm-l6", "sentence-transformers/all-MiniLM-L6-v2"):
        heads = pd.DataFrame({"model": [source] * 2, "layer": [0, 1], "head": [0, 0], "symmetry": [0.1, 0.2]})
        layers = pd.DataFrame({"model": [source] * 2, "family": ["encoder"] * 2, "layer": [0, 1],
                               "symmetry": [0.5, 0.4]})
        assert plotting.heads_vs_layers(heads, layers).axes[0].get_title() == "all-MiniLM-L6-v2 (encoder)"
