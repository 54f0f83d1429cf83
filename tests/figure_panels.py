"""Blank figure panels, found in the PNG a reader sees, and the size a figure's text is shown at (used by
``test_rendered_pages.py``).

A panel is located by its frame: every axes of the book's style (and of matplotlib's default one) draws a left
and a bottom spine, and the two meet at the panel's lower-left corner. So the detector looks for an "L": a long
straight vertical line of grey pixels whose lower end meets the left end of a long straight horizontal one. The
rectangle they span is the panel. It is blank when, apart from thin light-grey grid lines, practically every pixel
inside it has one colour (:data:`INK_SHARE` of the inside at most differs from the panel's median colour by more
than :data:`INK_LEVEL` levels): a heatmap of constant values, or axes that nothing was drawn on.

Colour bars have a frame too, but hold a gradient; legends in this style have no frame. An area left white by a
deleted axes has no frame, so it is not a panel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: A frame line is at least this share of the image's height (vertical) or width (horizontal) ...
LINE_SHARE = 0.12
#: ... and at least this many pixels long.
LINE_MIN_PX = 30
#: A frame pixel: grey (channels within this of each other) and darker than white by at least LINE_CONTRAST.
GREY_CHROMA = 12
LINE_CONTRAST = 20
#: The corner where the two spines meet may be off by this many pixels (antialiasing, line widths).
CORNER_SLACK = 4
#: The left and the bottom spine of one panel are drawn in one colour: their grey levels differ by at most this.
SPINE_COLOUR_LEVELS = 8
#: Inside a panel, a pixel is ink when one of its channels differs from the panel's median colour by more than this.
INK_LEVEL = 12
#: A panel is blank when at most this share of its inside is ink.
INK_SHARE = 0.001


@dataclass(frozen=True)
class Panel:
    """One panel found in an image: its box in pixels (left, top, right, bottom) and the share of ink inside."""

    left: int
    top: int
    right: int
    bottom: int
    ink: float

    @property
    def blank(self) -> bool:
        return self.ink <= INK_SHARE

    def __str__(self) -> str:
        return (f"panel at x {self.left}-{self.right}, y {self.top}-{self.bottom} px "
                f"({self.right - self.left} x {self.bottom - self.top}), {100 * self.ink:.2f}% ink")


def _rgb(image) -> np.ndarray:
    """An (H, W, 3) int array from a path, a PIL image or an array (alpha composited on white)."""
    from PIL import Image

    if isinstance(image, (str, Path)):
        image = Image.open(image)
    if isinstance(image, Image.Image):
        image = np.asarray(image.convert("RGBA"))
    a = np.asarray(image)
    if a.dtype != np.uint8:
        a = np.clip(np.round(a * 255 if a.max() <= 1.0 else a), 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    if a.shape[-1] == 4:
        alpha = a[..., 3:4].astype(float) / 255
        a = np.round(a[..., :3] * alpha + 255 * (1 - alpha)).astype(np.uint8)
    return a[..., :3].astype(int)


def _runs(mask_1d: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """(start, end exclusive) of every run of True at least ``min_len`` long."""
    padded = np.concatenate([[False], mask_1d, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return [(s, e) for s, e in zip(edges[::2], edges[1::2]) if e - s >= min_len]


def _segments(mask: np.ndarray, min_len: int) -> list[tuple[int, int, int, int]]:
    """Straight runs along axis 0 of ``mask`` (one per column), adjacent columns with the same run merged into one
    line: ``(first column, last column, start, end)``."""
    lines: list[list[int]] = []
    for col in range(mask.shape[1]):
        for start, end in _runs(mask[:, col], min_len):
            for line in lines:
                if line[1] == col - 1 and abs(line[2] - start) <= CORNER_SLACK and abs(line[3] - end) <= CORNER_SLACK:
                    line[1] = col
                    break
            else:
                lines.append([col, col, start, end])
    return [tuple(line) for line in lines]


def panels(image) -> list[Panel]:
    """Every framed panel of ``image`` (a PNG path, a PIL image or an RGB array), with its ink share."""
    rgb = _rgb(image)
    h, w, _ = rgb.shape
    chroma = rgb.max(axis=2) - rgb.min(axis=2)
    luma = rgb.mean(axis=2)
    frame = (chroma <= GREY_CHROMA) & (luma <= 255 - LINE_CONTRAST)
    vertical = _segments(frame, max(LINE_MIN_PX, int(LINE_SHARE * h)))
    horizontal = [(y0, y1, x0, x1) for y0, y1, x0, x1 in _segments(frame.T, max(LINE_MIN_PX, int(LINE_SHARE * w)))]
    found = []
    for vx0, vx1, top, vbottom in vertical:
        for hy0, hy1, hx0, hx1 in horizontal:
            if abs(hx0 - vx0) > CORNER_SLACK or not (hy0 - CORNER_SLACK <= vbottom - 1 <= hy1 + CORNER_SLACK):
                continue
            if not _is_frame_corner(frame, vx0, top, vbottom, hy0, hy1, horizontal):
                continue  # an L of grid lines or bars inside a panel, not the panel's own spines
            v_colour = np.median(luma[top:vbottom, vx0:vx1 + 1][frame[top:vbottom, vx0:vx1 + 1]])
            h_colour = np.median(luma[hy0:hy1 + 1, hx0:hx1][frame[hy0:hy1 + 1, hx0:hx1]])
            if abs(v_colour - h_colour) > SPINE_COLOUR_LEVELS:
                continue  # a curve or a bar meeting a grid line: the two spines of a panel share one colour
            left, right, bottom = vx1 + 1, hx1, hy0
            pad = CORNER_SLACK
            inside = rgb[top + pad:bottom - pad, left + pad:right - pad]
            if inside.shape[0] < LINE_MIN_PX // 2 or inside.shape[1] < LINE_MIN_PX // 2:
                continue
            found.append(Panel(left, top, right, bottom, _ink_share(inside)))
    return found


def _is_frame_corner(frame: np.ndarray, vx0: int, top: int, vbottom: int, hy0: int, hy1: int,
                     horizontal: list) -> bool:
    """True when the L is a panel's own lower-left corner: nothing line-like continues the bottom line to the left
    of the corner (a grid line hidden behind data, or a bar standing on one, does), and no long horizontal line
    crosses the vertical one (grid lines stop at a spine, they cross another grid line)."""
    gap = frame[hy0:hy1 + 1, max(0, vx0 - 3 * CORNER_SLACK):max(0, vx0 - CORNER_SLACK)]
    if gap.size and gap.any(axis=0).mean() > 0.5:
        return False
    inner = range(top + 2 * CORNER_SLACK, vbottom - 2 * CORNER_SLACK)
    return not any(y0 in inner and x0 < vx0 - CORNER_SLACK and x1 > vx0 + CORNER_SLACK
                   for y0, _, x0, x1 in horizontal)


def _ink_share(inside: np.ndarray) -> float:
    """Share of pixels that differ from the median colour, thin light-grey grid lines not counted."""
    median = np.median(inside.reshape(-1, 3), axis=0)
    ink = (np.abs(inside - median) > INK_LEVEL).any(axis=2)
    chroma = inside.max(axis=2) - inside.min(axis=2)
    luma = inside.mean(axis=2)
    grid = (chroma <= GREY_CHROMA) & (luma >= 190)
    # a grid line is a whole row or column of grid-coloured pixels; other light-grey pixels are data
    rows = (grid | ~ink).all(axis=1) & grid.any(axis=1)
    cols = (grid | ~ink).all(axis=0) & grid.any(axis=0)
    ink[rows, :] = False
    ink[:, cols] = False
    return float(ink.mean())


def blank_panels(image) -> list[Panel]:
    """The panels of ``image`` that hold nothing a reader can see (see the module's docstring)."""
    return [p for p in panels(image) if p.blank]


#: Smallest readable figure text on the screen (CSS px): a figure shown smaller than this makes its smallest text
#: (tick labels, legends) unreadable.
MIN_FIGURE_TEXT_PX = 7.0


def figure_text_px_per_pt() -> tuple[float, float]:
    """(CSS px per point of a figure's PNG at its natural size, the book style's smallest font in points).

    Figures are drawn at ``figure.dpi`` and stored at twice that (retina), so a point is ``2 * dpi / 72`` image
    pixels; the smallest font is the smallest of the style's tick-label and legend sizes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties

    from qkgeometry import plotting

    plotting.use_style()
    sizes = [FontProperties(size=rcParams[k]).get_size_in_points()
             for k in ("xtick.labelsize", "ytick.labelsize", "legend.fontsize")]
    return 2 * rcParams["figure.dpi"] / 72, min(sizes)


def figure_text_px(img: dict, px_per_pt: float, smallest_pt: float) -> float | None:
    """The smallest figure text of ``img`` as shown (CSS px), or None for an image not shown or not loaded."""
    w, nw = img.get("shownWidth") or 0, img.get("naturalWidth") or 0
    if min(w, nw) < 8:
        return None
    return smallest_pt * px_per_pt * w / nw
