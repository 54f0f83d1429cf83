"""The book's figures, in one style: :mod:`~qkgeometry.plotting.style` (the palette and :func:`use_style`) and one
module per chapter's figures.

* :mod:`~qkgeometry.plotting.decomposition`: chapters 1-2 (:func:`attention_parts`, :func:`matrix_triptych`,
  :func:`score_plane`,
  :func:`null_spread`, :func:`heads_vs_layers`);
* :mod:`~qkgeometry.plotting.intuition`: pictures where chapters 1-2's algebra starts
  (:func:`quadratic_form_and_signed_area`, :func:`directionality_bars`; :func:`quadratic_form_kind` and
  :func:`signed_area` give the numbers they draw);
* :mod:`~qkgeometry.plotting.objectives`: chapter 3 (:func:`one_step_distributions`,
  :func:`objective_trajectories`, :func:`objective_losses`, :func:`paper_training_curves`);
* :mod:`~qkgeometry.plotting.model_survey`: chapter 4 and ``qkgeometry plot`` (:func:`survey_layer_curves`,
  :func:`survey_head_heatmaps`, :func:`survey_scatter`, :func:`survey_twins`, :func:`paired_stacks`,
  :func:`modality_planes`, :func:`raw_vs_folded`, :func:`head_pair_terms`, :func:`survey_figures`; :func:`label_text` and :func:`check_scores` keep labels and
  scores of any survey safe to draw);
* :mod:`~qkgeometry.plotting.interactive`: interactive Plotly versions for the HTML book, each with its static
  fallback (:func:`interactive_attention_parts`, :func:`interactive_score_plane`, :func:`interactive_init_curves`);
* :mod:`~qkgeometry.plotting.training`: chapter 5 (:func:`init_curves`, :func:`survival_grid`,
  :func:`paired_difference_curve`, :func:`trajectories_vs_paper`);
* :mod:`~qkgeometry.plotting.trajectory`: scores across training, chapter 3 and ``qkgeometry plot --trajectory``
  (:func:`trajectory_curves`);
* :mod:`~qkgeometry.plotting.claims`: chapters 3-5, each headline's specification curve
  (:func:`specification_curve`);
* :mod:`~qkgeometry.plotting.head_behaviour`: chapter 7 (:func:`label_map`, :func:`geometry_by_label`,
  :func:`edit_losses`);
* :mod:`~qkgeometry.plotting.emergence`: chapter 8 (:func:`change_snapshots`, :func:`normalised_trajectories`,
  :func:`lag_dots`, :func:`copy_offsets`, :func:`interactive_head_trajectories`).

Every figure function takes tidy data and returns the matplotlib Figure (it never calls ``plt.show``), so that a
notebook stays one line per figure; an empty frame raises a ``ValueError`` that names the argument. A figure meant to
be read on a phone is *stacked*: one column of panels, the legend below, sized by :func:`stacked_figure` and
:func:`stacked_legend` (:data:`STACKED_WIDTH` inches wide, no text under :data:`STACKED_FONT` points), so that
:func:`shown_text_px` finds its text at least :data:`PHONE_TEXT_PX` px high on a 390-px phone. Importing this
package changes no global state: the style is applied only when :func:`use_style` is called.
"""

from __future__ import annotations

from .claims import specification_curve
from .decomposition import (
    attention_parts,
    heads_vs_layers,
    matrix_triptych,
    model_name,
    null_spread,
    score_plane,
)
from .emergence import (
    SCORE_WORDS,
    change_snapshots,
    copy_offsets,
    interactive_head_trajectories,
    lag_dots,
    normalised_trajectories,
)
from .head_behaviour import edit_losses, geometry_by_label, label_colours, label_map, primary_label
from .interactive import (
    InteractiveFigure,
    interactive_attention_parts,
    interactive_init_curves,
    interactive_score_plane,
)
from .intuition import directionality_bars, quadratic_form_and_signed_area, quadratic_form_kind, signed_area
from .model_survey import (
    MAX_LABEL_CHARS,
    MAX_LEGEND_ENTRIES,
    MAX_PANELS,
    MAX_TEXT_LABELS,
    check_results_file,
    check_scores,
    curve_label,
    head_pair_terms,
    label_text,
    modality_planes,
    paired_stacks,
    raw_vs_folded,
    stack_of,
    survey_figures,
    survey_head_heatmaps,
    survey_layer_curves,
    survey_scatter,
    survey_twins,
)
from .objectives import (
    objective_losses,
    objective_trajectories,
    one_step_distributions,
    paper_training_curves,
)
from .style import (
    DIVERGING,
    FAMILY_COLORS,
    INIT_COLORS,
    INIT_STYLES,
    MODEL_MARKERS,
    OBJECTIVE_COLORS,
    OBJECTIVE_LABELS,
    PHONE_COLUMN_PX,
    PHONE_TEXT_PX,
    STACK_COLORS,
    STACK_WORDS,
    STACKED_FONT,
    STACKED_WIDTH,
    legend_overlaps,
    plt,
    require_rows,
    shown_text_px,
    stacked_figure,
    stacked_legend,
    use_style,
)
from .training import PANEL_WORDS, init_curves, paired_difference_curve, survival_grid, trajectories_vs_paper
from .trajectory import run_figure, trajectory_curves, trajectory_figures

#: The figure functions, one entry per figure the book draws (each returns a matplotlib Figure).
FIGURES = ("attention_parts", "change_snapshots", "copy_offsets", "directionality_bars", "head_pair_terms", "heads_vs_layers",
           "init_curves", "lag_dots", "matrix_triptych", "modality_planes", "normalised_trajectories", "null_spread",
           "objective_losses", "objective_trajectories", "one_step_distributions", "paired_difference_curve",
           "paired_stacks", "paper_training_curves", "quadratic_form_and_signed_area", "raw_vs_folded", "score_plane",
           "specification_curve",
           "survey_head_heatmaps",
           "survey_layer_curves", "survey_scatter", "survey_twins", "survival_grid", "trajectories_vs_paper",
           "trajectory_curves")

__all__ = [
    "DIVERGING",
    "FAMILY_COLORS",
    "FIGURES",
    "INIT_COLORS",
    "INIT_STYLES",
    "MAX_LABEL_CHARS",
    "MAX_LEGEND_ENTRIES",
    "MAX_PANELS",
    "MAX_TEXT_LABELS",
    "MODEL_MARKERS",
    "OBJECTIVE_COLORS",
    "OBJECTIVE_LABELS",
    "PANEL_WORDS",
    "PHONE_COLUMN_PX",
    "PHONE_TEXT_PX",
    "SCORE_WORDS",
    "STACKED_FONT",
    "STACKED_WIDTH",
    "STACK_COLORS",
    "STACK_WORDS",
    "InteractiveFigure",
    "attention_parts",
    "change_snapshots",
    "check_results_file",
    "check_scores",
    "copy_offsets",
    "curve_label",
    "directionality_bars",
    "edit_losses",
    "geometry_by_label",
    "head_pair_terms",
    "heads_vs_layers",
    "init_curves",
    "interactive_attention_parts",
    "interactive_head_trajectories",
    "interactive_init_curves",
    "interactive_score_plane",
    "label_colours",
    "label_map",
    "label_text",
    "lag_dots",
    "legend_overlaps",
    "matrix_triptych",
    "modality_planes",
    "model_name",
    "normalised_trajectories",
    "null_spread",
    "objective_losses",
    "objective_trajectories",
    "one_step_distributions",
    "paired_difference_curve",
    "paired_stacks",
    "paper_training_curves",
    "plt",
    "primary_label",
    "quadratic_form_and_signed_area",
    "quadratic_form_kind",
    "raw_vs_folded",
    "require_rows",
    "run_figure",
    "score_plane",
    "shown_text_px",
    "signed_area",
    "specification_curve",
    "stack_of",
    "stacked_figure",
    "stacked_legend",
    "survey_figures",
    "survey_head_heatmaps",
    "survey_layer_curves",
    "survey_scatter",
    "survey_twins",
    "survival_grid",
    "trajectories_vs_paper",
    "trajectory_curves",
    "trajectory_figures",
    "use_style",
]
