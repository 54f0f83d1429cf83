"""The analyses of the book, each iterating layers and heads through one shared, device-safe iterator
(:mod:`~qkgeometry.analyses.iterate`):

* :mod:`~qkgeometry.analyses.nulls` — exact null laws of both scores and the simulations beside them (chapters 2, 4);
* :mod:`~qkgeometry.analyses.baselines` — random-factor baselines of given shapes (chapter 2);
* :mod:`~qkgeometry.analyses.cost` — what scoring costs, dense against factored, timed side by side (chapter 2);
* :mod:`~qkgeometry.analyses.gradients` — the rank-1 logit gradient and its pair classes (chapter 3);
* :mod:`~qkgeometry.analyses.anatomy` — within-head shares, key-bias ratios, input-norm forms (chapter 4);
* :mod:`~qkgeometry.analyses.stack_gap` — encoder against decoder stacks counted by lineage, across its
  specification curve (chapter 4);
* :mod:`~qkgeometry.analyses.spectrum` and :mod:`~qkgeometry.analyses.rotary` — beyond the paper (chapter 6);
* :mod:`~qkgeometry.analyses.fair_test`, :mod:`~qkgeometry.analyses.carriers` — chapter 3's fair test and what
  carries its gap; :mod:`~qkgeometry.analyses.init_controls` — chapter 5's control starts;
  :mod:`~qkgeometry.analyses.change_points` and :mod:`~qkgeometry.analyses.emergence` — chapter 8.

Each module is imported on its own (``from qkgeometry.analyses import nulls``); this package imports none of them.
"""
