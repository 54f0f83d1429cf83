"""Pictures for where the algebra starts: what each part of W_qk does to a pair of tokens in the plane (chapter 1,
"The bilinear-form view"), and how the directionality score reads a small matrix's row and column norms (chapter 2,
"The two scores").

* :func:`quadratic_form_and_signed_area`: level curves of ``q(x) = xᵀ M_s x`` for 2 × 2 symmetric matrices (ellipses
  when definite, hyperbolas around a saddle when indefinite) next to ``xᵀ M_n y`` as a signed area, drawn twice,
  once for ``(x, y)`` and once for ``(y, x)``;
* :func:`directionality_bars`: the row norms and the column norms of a matrix as bars, with the threshold
  ``mean + num_std · sd`` the score uses and each norm's excess over it;
* :func:`quadratic_form_kind` and :func:`signed_area`: the two numbers those pictures rest on.

Both figures keep their text at 10 points or more on a figure about 5 inches wide, so that it stays readable on a
phone (:func:`~qkgeometry.plotting.shown_text_px`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..formatting import format_number
from ..scores import directionality_score, outlier_threshold
from .style import DIVERGING, STACKED_FONT, plt, require_rows, stacked_legend

__all__ = ["directionality_bars", "quadratic_form_and_signed_area", "quadratic_form_kind", "signed_area"]

#: The colour of a norm's excess over the threshold (not a family colour: blue and red keep meaning encoder and
#: decoder), and of the bars below it.
EXCESS_COLOR = "#e69f00"
NORM_COLOR = "0.72"


# --------------------------------------------------------------------------------------------------- checks
def _matrix(value, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``value`` as a finite float64 array (of ``shape`` when given), or a ValueError that names ``name``."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected an array of real numbers, got {type(value).__name__}.") from exc
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: has NaN or infinite entries.")
    return arr


def _symmetric(value, name: str) -> np.ndarray:
    S = _matrix(value, name, (2, 2))
    if not np.allclose(S, S.T, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(S).max()))):
        raise ValueError(f"{name}: expected a symmetric 2 × 2 matrix (S = Sᵀ); pass the symmetric part M_s of a "
                         "matrix (qkgeometry.decompose).")
    if not np.any(S):
        raise ValueError(f"{name}: is all zeros, so it has no level curves to draw.")
    return S


def _vector(value, name: str) -> np.ndarray:
    v = _matrix(value, name, (2,))
    if not np.any(v):
        raise ValueError(f"{name}: is the zero vector; pass a nonzero token in the plane.")
    return v


# ------------------------------------------------------------------------------------------------- numbers
def quadratic_form_kind(S) -> str:
    """What the level curves of ``q(x) = xᵀ S x`` look like, from the eigenvalues of the symmetric 2 × 2 (or d × d)
    matrix ``S``: ``"positive definite"`` or ``"negative definite"`` (ellipses), ``"indefinite"`` (hyperbolas
    around a saddle) or ``"semidefinite"`` (parallel lines; one eigenvalue is 0). Chapter 1.

    >>> quadratic_form_kind([[2.0, 0.6], [0.6, 1.0]]), quadratic_form_kind([[1.0, 1.5], [1.5, -1.0]])
    ('positive definite', 'indefinite')
    """
    S = _matrix(S, "S")
    if S.ndim != 2 or S.shape[0] != S.shape[1] or not np.allclose(S, S.T):
        raise ValueError(f"S: expected a symmetric square matrix, got shape {S.shape}.")
    eig = np.linalg.eigvalsh(S)
    tol = 1e-12 * max(1.0, float(np.abs(eig).max()))
    if eig[0] > tol:
        return "positive definite"
    if eig[-1] < -tol:
        return "negative definite"
    if eig[0] < -tol and eig[-1] > tol:
        return "indefinite"
    return "semidefinite"


def signed_area(x, y) -> float:
    """The signed area ``x₁ y₂ − x₂ y₁`` of the parallelogram that the plane vectors ``x`` and ``y`` span: positive
    when ``y`` lies counter-clockwise of ``x``, and ``signed_area(y, x) = −signed_area(x, y)``. In two dimensions
    every skew matrix is ``a J`` with ``J = [[0, 1], [−1, 0]]``, so ``xᵀ M_n y = a · signed_area(x, y)``. Chapter 1.

    >>> signed_area([1.0, 0.0], [0.0, 1.0]), signed_area([0.0, 1.0], [1.0, 0.0])
    (1.0, -1.0)
    """
    x, y = _matrix(x, "x", (2,)), _matrix(y, "y", (2,))
    return float(x[0] * y[1] - x[1] * y[0])


# ------------------------------------------------------------------------------------------------ chapter 1
def _level_curves(ax, S: np.ndarray, extent: float) -> None:
    """Filled level sets of ``xᵀ S x`` on one zero-centred colour scale, a few level curves, the zero curve and
    the principal axes (the eigenvectors of ``S``)."""
    t = np.linspace(-extent, extent, 301)
    x1, x2 = np.meshgrid(t, t)
    q = S[0, 0] * x1**2 + 2 * S[0, 1] * x1 * x2 + S[1, 1] * x2**2
    vmax = float(np.abs(q).max())
    ax.contourf(x1, x2, q, levels=np.linspace(-vmax, vmax, 23), cmap=DIVERGING, vmin=-vmax, vmax=vmax)
    lines = vmax * np.array([-0.8, -0.6, -0.4, -0.2, -0.05, 0.05, 0.2, 0.4, 0.6, 0.8])
    ax.contour(x1, x2, q, levels=lines, colors="0.25", linewidths=0.7, linestyles="solid")
    if q.min() < 0 < q.max():  # the lines on which a token scores itself 0
        ax.contour(x1, x2, q, levels=[0.0], colors="black", linewidths=1.8)
    _, vectors = np.linalg.eigh(S)
    for v in vectors.T:
        ax.plot(*(np.outer([-2 * extent, 2 * extent], v).T), color="0.15", lw=0.9, ls=(0, (4, 3)))
    eig = np.linalg.eigvalsh(S)
    ax.set_title(f"$x^\\top M_s\\, x$, {quadratic_form_kind(S)}\neigenvalues "
                 f"{format_number(eig[1], decimals=2)} and {format_number(eig[0], decimals=2)}",
                 fontsize=STACKED_FONT, fontweight="normal")
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)


def _parallelogram(ax, N: np.ndarray, u: np.ndarray, v: np.ndarray, names: tuple[str, str]) -> float:
    """``uᵀ N v`` drawn as the parallelogram of ``u`` and ``v``, shaded red (positive) or blue (negative), with an
    arc from ``u`` to ``v`` that shows the orientation. Returns ``uᵀ N v``."""
    from matplotlib.patches import Polygon

    value = float(u @ N @ v)
    cmap = plt.get_cmap(DIVERGING)
    colour = cmap(0.82) if value > 0 else cmap(0.18) if value < 0 else (0.6, 0.6, 0.6, 1.0)
    shape = Polygon(np.array([[0.0, 0.0], u, u + v, v]), closed=True, facecolor=colour, alpha=0.45,
                    edgecolor=colour, linewidth=1.5)
    shape.set_gid("parallelogram")
    ax.add_patch(shape)
    sign = "+" if value > 0 else "\u2212" if value < 0 else "0"
    ax.text(*((u + v) / 2), sign, ha="center", va="center", fontsize=20, fontweight="bold", color="0.1")
    for w, name in ((u, names[0]), (v, names[1])):
        ax.annotate("", xy=w, xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": "black", "lw": 1.6,
                                                         "shrinkA": 0, "shrinkB": 0, "mutation_scale": 14})
        ax.annotate(f"${name}$", xy=w, xytext=(6 * np.sign(w[0] or 1), 6 * np.sign(w[1] or 1)),
                    textcoords="offset points", ha="left" if w[0] >= 0 else "right",
                    va="bottom" if w[1] >= 0 else "top", fontsize=13)
    # the orientation: an arc from the first vector to the second, the short way round
    radius = 0.35 * min(np.linalg.norm(u), np.linalg.norm(v))
    start, turn = np.arctan2(u[1], u[0]), np.arctan2(signed_area(u, v), float(u @ v))
    angles = start + turn * np.linspace(0.0, 1.0, 40)
    arc = radius * np.column_stack([np.cos(angles), np.sin(angles)])
    ax.plot(arc[:-4, 0], arc[:-4, 1], color="0.1", lw=1.2)
    ax.annotate("", xy=arc[-1], xytext=arc[-5], arrowprops={"arrowstyle": "-|>", "color": "0.1", "lw": 1.2,
                                                           "shrinkA": 0, "shrinkB": 0, "mutation_scale": 11})
    ax.set_title(f"${names[0]}^\\top M_n\\, {names[1]}$ = {format_number(value, spec='+.2f')}",
                 fontsize=STACKED_FONT + 1, fontweight="normal")
    return value


def quadratic_form_and_signed_area(symmetric: Sequence, skew, x, y, *, extent: float = 2.0):
    """The two parts of a 2 × 2 form as pictures. Top row, one panel per matrix of ``symmetric`` (symmetric 2 × 2,
    such as the symmetric parts M_s of two matrices): the level curves of the quadratic form ``q(x) = xᵀ M_s x`` over
    ``[−extent, extent]²``, red where q > 0 and blue where q < 0, with the principal axes (the eigenvectors, dashed)
    and, for an indefinite form, the two lines where q = 0 (black). Bottom row: ``xᵀ M_n y`` for the skew 2 × 2
    matrix ``skew = a J`` as ``a`` times the signed area of the parallelogram of ``x`` and ``y`` (vectors of
    shape (2,)), shaded red when positive and blue when negative, with an arc from the first vector to the second;
    the right panel swaps ``x`` and ``y``, which flips the sign.

    Chapter 1, "The bilinear-form view". Returns the Figure; a bad argument raises a ValueError that names it.
    """
    from matplotlib.ticker import MaxNLocator

    if isinstance(symmetric, np.ndarray) and symmetric.ndim == 2:
        symmetric = [symmetric]
    require_rows(symmetric, "symmetric", "pass at least one symmetric 2 × 2 matrix")
    forms = [_symmetric(S, f"symmetric[{k}]") for k, S in enumerate(symmetric)]
    N = _matrix(skew, "skew", (2, 2))
    if not np.allclose(N, -N.T, rtol=0, atol=1e-12 * max(1.0, float(np.abs(N).max()))):
        raise ValueError("skew: expected a skew-symmetric 2 × 2 matrix (N = −Nᵀ); pass the skew part M_n of a "
                         "matrix (qkgeometry.decompose).")
    u, v = _vector(x, "x"), _vector(y, "y")
    if not (np.isfinite(extent) and extent > 0):
        raise ValueError(f"extent: expected a positive number, got {extent!r}.")
    ncols = max(2, len(forms))
    fig, axes = plt.subplots(2, ncols, figsize=(2.55 * ncols, 5.4), layout="constrained", squeeze=False)
    for ax, S in zip(axes[0], forms):
        _level_curves(ax, S, extent)
    corners = np.array([[0.0, 0.0], u, v, u + v])
    low, high = corners.min(axis=0), corners.max(axis=0)
    pad = 0.22 * float((high - low).max())
    for ax, (first, second, names) in zip(axes[1], ((u, v, ("x", "y")), (v, u, ("y", "x")))):
        _parallelogram(ax, N, first, second, names)
        ax.set_xlim(low[0] - pad, high[0] + pad)
        ax.set_ylim(low[1] - pad, high[1] + pad)
    for ax in axes.flat:
        ax.set_aspect("equal")
        ax.grid(False)
        ax.tick_params(labelsize=STACKED_FONT)
        for axis in (ax.xaxis, ax.yaxis):  # a few round ticks, clear of the axis label
            axis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 5, 10]))
        ax.set_xlabel("$x_1$", fontsize=STACKED_FONT + 1, labelpad=2)
        ax.set_ylabel("$x_2$", fontsize=STACKED_FONT + 1, labelpad=3)
    for ax in [*axes[0, len(forms):], *axes[1, 2:]]:
        ax.remove()
    return fig


# ------------------------------------------------------------------------------------------------ chapter 2
def directionality_bars(M, num_std: float = 2.0):
    """The directionality score of ``M`` (d, d), drawn: the row norms ``r_i = ‖M[i, :]‖`` (query side, left) and the
    column norms ``c_j = ‖M[:, j]‖`` (key side, right) as bars on one scale, each panel with its mean (dotted) and
    its threshold ``mean + num_std · sd`` (dashed; unbiased sd, :func:`qkgeometry.scores.outlier_threshold`), the part
    of each bar above the threshold in orange, and the two excesses ``E_r``, ``E_c`` in the panel titles. The
    figure's title gives ``d(M) = (E_r − E_c)/(E_r + E_c)`` as :func:`qkgeometry.directionality_score` computes it.

    Chapter 2, "The two scores". Returns the Figure; a bad argument raises a ValueError that names it.
    """
    M = _matrix(M, "M")
    require_rows(M, "M", "pass a square matrix of at least 2 × 2")
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] < 2:
        raise ValueError(f"M: expected a square (d, d) matrix with d >= 2, got shape {M.shape}.")
    if not np.any(M):
        raise ValueError("M: is all zeros, so it has no norms to compare.")
    if isinstance(num_std, bool) or not np.isfinite(num_std) or num_std < 0:
        raise ValueError(f"num_std: expected a finite number >= 0, got {num_std!r}.")
    d = M.shape[0]
    score = float(directionality_score(M, num_std))
    fig, axes = plt.subplots(1, 2, figsize=(5.0, 3.6), sharey=True, layout="constrained")
    k = format_number(num_std, spec="g")
    panels = ((np.linalg.norm(M, axis=1), "rows $r_i$ (query side)", "E_r", "row $i$"),
              (np.linalg.norm(M, axis=0), "columns $c_j$ (key side)", "E_c", "column $j$"))
    positions = np.arange(1, d + 1)
    for ax, (norms, what, excess_name, xlabel) in zip(axes, panels):
        tau, mean = float(outlier_threshold(norms, num_std)), float(np.mean(norms))
        below, excess = np.minimum(norms, tau), np.clip(norms - tau, 0.0, None)
        ax.bar(positions, below, color=NORM_COLOR, width=0.7, label="norm", gid="norms")
        ax.bar(positions, excess, bottom=below, color=EXCESS_COLOR, width=0.7, label="excess over the threshold",
               gid="excess")
        ax.axhline(mean, color="0.3", lw=1.2, ls=":", label="mean", gid="mean")
        ax.axhline(tau, color="black", lw=1.5, ls="--", label=f"mean + {k} sd (threshold)", gid="threshold")
        if excess.max() > 0:  # at small d the excess is a sliver on top of its bar: point at it
            top = int(np.argmax(excess))
            right = top < d / 2
            ax.annotate(f"excess {format_number(float(excess[top]), decimals=2)}",
                        xy=(positions[top] + (0.3 if right else -0.3), tau + excess[top] / 2),
                        xytext=(18 if right else -18, -30), textcoords="offset points",
                        ha="left" if right else "right", va="top", fontsize=STACKED_FONT,
                        arrowprops={"arrowstyle": "-|>", "color": "black", "lw": 1.0, "shrinkA": 2, "shrinkB": 1})
        ax.set_title(f"{what}\n${excess_name}$ = {format_number(float(excess.sum()), decimals=2)}",
                     fontsize=STACKED_FONT + 0.5, fontweight="normal")
        ax.set_xticks(positions)
        ax.set_xlabel(xlabel, fontsize=STACKED_FONT + 0.5)
        ax.tick_params(labelsize=STACKED_FONT)
        ax.grid(axis="x", visible=False)
    axes[0].set_ylabel("norm", fontsize=STACKED_FONT + 0.5)
    fig.suptitle(f"$d(M)$ = {format_number(score, decimals=2)}", fontsize=STACKED_FONT + 1.5, fontweight="bold")
    handles, labels = axes[1].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (labels[i] not in ("norm", "excess over the threshold"), i))
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]  # the bars' two parts first
    stacked_legend(fig, handles, labels, max_ncols=2)
    return fig
