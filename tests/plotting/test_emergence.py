"""Chapter 8's figures draw from tidy frames and refuse empty ones."""
import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

from qkgeometry.plotting import emergence as figures

STEPS = np.arange(0, 401, 20)


def _curves():
    frames = []
    for r in range(3):
        frames.append(pd.DataFrame({"run": f"s{r}", "step": STEPS, "geometry": np.tanh(STEPS / 80.0),
                                    "behaviour": np.tanh(STEPS / 120.0)}))
    return pd.concat(frames, ignore_index=True)


def test_normalised_trajectories_one_panel_per_role():
    fig = figures.normalised_trajectories({"previous-token": _curves(), "induction": _curves()}, {})
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2 and axes[0].get_xscale() == "symlog"
    assert len(axes[0].lines) == 3 * 2 + 1                # two curves per run and the 0.5 line


def test_lag_dots_marks_unlabelled_runs():
    table = pd.DataFrame({"run": ["a-s0", "a-s1"], "role": "induction", "labelled": [True, False],
                          "geometry_step": [100.0, np.nan], "behaviour_step": [150.0, 300.0]})
    fig = figures.lag_dots(table, {"induction": "induction head"})
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["s0", "s1 (no label)"]
    with pytest.raises(ValueError, match="table"):
        figures.lag_dots(table.iloc[:0], {})


def test_change_snapshots_needs_one_of_each_per_snapshot():
    m = np.eye(4)
    fig = figures.change_snapshots([m, m], [m, m], [m, -m], ["a", "b"])
    assert len(fig.axes) == 6
    with pytest.raises(ValueError, match="one of each"):
        figures.change_snapshots([m], [m, m], [m], ["a"])


def test_interactive_head_trajectories_has_a_menu_and_a_fallback():
    rows = [{"step": s, "layer": layer, "head": h, "previous": 0.1 * h + s / 1000, "symmetry": 0.01 * s}
            for s in STEPS for layer in (0, 1) for h in (0, 1)]
    fig = figures.interactive_head_trajectories(pd.DataFrame(rows), ["previous", "symmetry"], "heads")
    assert len(fig.figure.data) == 2 * 4
    assert len(fig.figure.layout.updatemenus[0].buttons) == 2
    assert fig.png()[:4] == b"\x89PNG"
    with pytest.raises(KeyError, match="missing"):
        figures.interactive_head_trajectories(pd.DataFrame(rows), ["nope"], "heads")


def test_copy_offsets_draws_each_seed_the_mean_and_its_interval():
    offsets = np.arange(-1, 4)
    per_seed = pd.DataFrame([{"run": f"s{r}", "offset": o, "attention": 0.05 + 0.1 * (o == 2) + 0.01 * r}
                             for r in range(3) for o in offsets])
    over = per_seed.groupby("offset", as_index=False)["attention"].mean().assign(low=lambda f: f["attention"] - 0.01,
                                                                                 high=lambda f: f["attention"] + 0.01)
    trajectory = pd.DataFrame([{"run": f"s{r}", "step": s, "offset": o, "attention": 0.04 + s / 1e4 * (o == 2)}
                               for r in range(3) for s in (0, 100, 200) for o in (1, 2)])
    fig = figures.copy_offsets(per_seed, over, trajectory, chance=0.04)
    top, bottom = [ax for ax in fig.axes if ax.get_visible()][:2]
    assert len(top.lines) == 3 + 1 + 2                     # one line per seed, the chance line, two rows of caps
    assert [t.get_text() for t in top.get_xticklabels()] == ["−1", "0", "+1", "+2", "+3"]
    assert len(bottom.lines) == 3 * 2 + 1
    with pytest.raises(ValueError, match=r"^trajectory has no rows"):
        figures.copy_offsets(per_seed, over, trajectory.iloc[:0], chance=0.04)
