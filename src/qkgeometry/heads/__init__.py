"""What a head's geometry says about its job (chapter 7), one module per step:

* :mod:`~qkgeometry.heads.behaviour` — behaviour scores from attention patterns, their chance levels, and labels;
* :mod:`~qkgeometry.heads.geometry` — each head's geometric scores, from its weights and from its real inputs;
* :mod:`~qkgeometry.heads.hypotheses` — AUC separations and the chapter's hypotheses as two Holm families;
* :mod:`~qkgeometry.heads.surgery` — a head cut to its symmetric or skew part inside a running model;
* :mod:`~qkgeometry.heads.models` — the chapter's forward models, rebuilt from the offline weights, and held-out text;
* :mod:`~qkgeometry.heads.model_sweep` — behaviour, geometry and interventions for every head of one model.

Each module is imported on its own (``from qkgeometry.heads import behaviour``); this package imports none of them.
"""
