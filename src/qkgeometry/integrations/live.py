"""What every training callback shares: score a model held in memory at a training step, keep the rows of each
run in a trajectory store, and return the medians to log. Chapters 3 and 5.

A *run* is one start of training (:class:`~qkgeometry.surveying.runs.RunId`: its name, when it started, its seed
and a fingerprint of its configuration). :meth:`LiveScorer.start` begins one; :meth:`LiveScorer.score` scores one
step of it. The callbacks start a run each time training starts, and continue the run a checkpoint came from when
training resumes from it.
"""

from __future__ import annotations

import warnings
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._lazy import LazyModule

if TYPE_CHECKING:
    import pandas as pd

    from ..surveying.runs import RunId
    from ..surveying.store import SurveyStore
else:
    pd = LazyModule("pandas")

__all__ = ["LIVE_PREFIX", "LiveScorer"]

#: the ``source`` of a row scored during training starts with this (``live:<run>/checkpoint-<step>``): it names no
#: file, so a later ``qkgeometry trajectory`` of the saved checkpoints never mistakes it for one
LIVE_PREFIX = "live:"


class LiveScorer:
    """Scores a model while it trains and keeps the rows. Chapter 3.

    ``store``: a trajectory store (``.sqlite``, or ``.csv``) to append the rows to, or None to keep them in memory
    only (:attr:`frames`). ``every``: score every this many steps (the callbacks' interval). ``run``: the name of
    the runs this scorer scores (default: the training's output folder, resolved; the current folder for
    :meth:`score` alone): each start of training is one run of that name, stored apart from the others.
    ``per``, ``num_std`` and ``input_norm`` as for :func:`qkgeometry.score_model`. ``prefix``: the name of the
    logged medians (``qkgeometry/symmetry_median``...).

    Every argument is checked here, before training starts; the store is created when the first rows are written,
    and held open (one connection) until the run ends (:meth:`close`). A step whose Q/K weights hold NaN or Inf,
    or an all-zero W_qk, is stored and returned as NaN, with one warning per run that names the step and the layer.

    >>> scorer = LiveScorer(every=10)            # doctest: +SKIP
    >>> for step in range(101):                  # doctest: +SKIP
    ...     train_one_step(model)
    ...     if scorer.due(step):
    ...         medians = scorer.score(model, step)
    """

    def __init__(self, store: str | Path | None = None, every: int = 100, *, run: str | None = None,
                 per: str = "layer", num_std: float = 2.0, input_norm: str = "raw", prefix: str = "qkgeometry"):
        from ..surveying.scoring import check_score_args, check_store_path

        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"`every` must be a whole number of steps >= 1; got {every!r}.")
        check_score_args(per, num_std, input_norm)
        if run is not None and (not isinstance(run, str) or not run.strip()):
            raise ValueError(f"`run` must be a non-empty name for this training run; got {run!r}.")
        self.store = check_store_path(store, "`store`")
        self.every, self.name = every, run
        self.per, self.num_std, self.input_norm, self.prefix = per, float(num_std), input_norm, prefix
        #: the run being scored (None before the first :meth:`start` or :meth:`score`)
        self.run: RunId | None = None
        #: the steps scored in this run, in the order they were scored
        self.scored: list[int] = []
        self._kept: deque[tuple[pd.DataFrame, dict[str, Any]]] = deque()
        self._db: SurveyStore | None = None
        self._warned = False
        self._failures: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------------------------------ runs
    def start(self, name: str | Path | None = None, *, seed: int | None = None, config: str = "-",
              resume: str | None = None, step: int = 0) -> RunId:
        """Begin a run (and end the one before): named ``run`` if the scorer has one, else ``name`` (the
        training's output folder), else the current folder; ``seed`` and ``config`` (a fingerprint of the training's
        configuration) go into its identity. ``resume``: the identity of a run to continue (training that resumes
        from a checkpoint it saved), from ``step``; when the store already holds later steps of it (the start it
        resumes went on past its last checkpoint), one warning says so, and each is replaced when training
        reaches it again."""
        from ..surveying.runs import RunId

        self.close()
        continued = None if resume is None else RunId.parse(resume)
        if continued is None:
            label = self.name or (str(Path(name).resolve()) if name is not None else str(Path.cwd()))
            continued = RunId.start(label, seed, config)
        self.run, self.scored, self._warned = continued, [], False
        self._kept = deque(maxlen=1) if self.store is not None else deque()
        if resume is not None and self.store is not None and self.store.exists():
            later = [s for s in self._open().steps_of(str(self.run)) if s > step]
            if later:
                warnings.warn(f"qkgeometry: {str(self.store)!r} already holds {len(later)} later step(s) of run "
                              f"{str(self.run)!r} ({later[0]}–{later[-1]}) than step {step}, where training starts "
                              "again; each is replaced when training reaches it again.", stacklevel=2)
        return self.run

    def due(self, step: int) -> bool:
        """Whether ``step`` is one to score (a multiple of ``every``)."""
        return step % self.every == 0

    def close(self) -> None:
        """End the run: close the store's connection (the rows are all written)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> LiveScorer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _open(self) -> SurveyStore:
        from ..surveying.store import SurveyStore

        if self._db is None:
            self._db = SurveyStore(self.store, what="`store`")
        return self._db

    def check(self, model: Any, who: str = "LiveScorer") -> None:
        """Refuse, in one line naming ``who``, a model that can never be scored (not a ``transformers`` model or a
        wrapper of one, an architecture without a known Q/K layout, an adapter whose weights are not a sum): its
        plans are resolved and its first layer read, as :meth:`score` will. Training callbacks call it when
        training starts, on every process."""
        from ..errors import first_line
        from ..readers.module import live_model

        try:
            with live_model(model, input_norm=self.input_norm) as qk:
                next(qk.iter_layers(convert=False))
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise ValueError(f"{who}: this model cannot be scored ({type(e).__name__}: {first_line(e)})") from e

    def safely(self, step: int, score: Any) -> Any:
        """``score()``, or None with a warning when it fails (each kind of failure once per scorer): training never
        stops because a step could not be scored."""
        from ..errors import first_line

        try:
            return score()
        except Exception as e:
            seen = (type(e).__name__, first_line(e))
            if seen not in self._failures:
                self._failures.add(seen)
                warnings.warn(f"qkgeometry: step {step} was not scored ({seen[0]}: {seen[1]}); training goes on "
                              "(this failure is reported once).", stacklevel=2)
            return None

    # ------------------------------------------------------------------------------------------ scoring
    def score(self, model: Any, step: int, *, tokens: int | None = None) -> dict[str, float]:
        """Score ``model`` (a ``transformers`` model, or a wrapper of one: :func:`qkgeometry.load_qk`) at ``step``
        of the current run (a new one, :meth:`start`, when none was started): the rows go to the store (replacing
        any this run stored for that step) and to :attr:`frames`; returns the medians over layers (or heads) of
        both scores, named for logging (one pair per attention stack when there are several), NaN when a layer's
        scores are undefined."""
        from .._version import __version__
        from ..readers.module import live_model
        from ..surveying.scoring import score_layers

        if self.run is None:
            self.start()
        step = int(step)
        undefined: list[tuple[Any, ValueError]] = []
        with live_model(model, input_norm=self.input_norm) as qk:
            rows = score_layers(qk, self.per, self.num_std, on_undefined=lambda layer, e: undefined.append((layer, e)))
            qk_norm, input_norm = qk.qk_norm or "", qk.input_norm
        if undefined and not self._warned:
            self._warned = True
            warnings.warn(_undefined_message(step, *undefined[0]), stacklevel=2)
        checkpoint = f"checkpoint-{step}"
        key = {"source": f"{LIVE_PREFIX}{self.run}/{checkpoint}", "per": self.per, "num_std": self.num_std,
               "qk_norm": qk_norm, "input_norm": input_norm, "revision": "live", "qkgeometry_version": __version__,
               "init": "pretrained", "modality": "language", "run": str(self.run), "checkpoint": checkpoint,
               "stage": None, "step": step, "tokens": None if tokens is None else int(tokens)}
        if self.store is not None:
            self._open().append(rows, key)
        self._kept.append((rows, key))
        self.scored.append(step)
        return self.medians(rows)

    def medians(self, frame: pd.DataFrame) -> dict[str, float]:
        """``{prefix/symmetry_median, prefix/directionality_median}`` of ``frame`` (per attention stack, suffixed
        with its name, when the model has several); NaN when any row's score is."""
        import numpy as np

        out = {}
        components = frame["component"].to_numpy()
        stacks = list(dict.fromkeys(components))
        for component in stacks:
            mask = components == component
            suffix = "" if len(stacks) == 1 else f"/{component}"
            for score in ("symmetry", "directionality"):
                out[f"{self.prefix}/{score}_median{suffix}"] = float(np.median(frame[score].to_numpy(float)[mask]))
        return out

    @property
    def frames(self) -> list[pd.DataFrame]:
        """The rows of this run held in memory, one frame per scored step (the columns of a trajectory store):
        every step without a store; with one, only the latest (the store holds them all)."""
        return [_frame(rows, key) for rows, key in self._kept]

    @property
    def latest(self) -> pd.DataFrame | None:
        """The rows of the step scored last (the last of :attr:`frames`, without building the others), or None
        before the first. Chapter 8 reads each step's per-head rows from it."""
        return _frame(*self._kept[-1]) if self._kept else None

    def trajectory(self) -> pd.DataFrame:
        """Every row scored so far in this run, in step order (from the store when there is one)."""
        from ..surveying.store import empty_frame
        from ..surveying.trajectories import order_rows, read_trajectory

        if self.store is not None and self.run is not None:
            rows = read_trajectory(self.store)
            return rows[rows["run"] == str(self.run)].reset_index(drop=True)
        frames = self.frames
        return order_rows(pd.concat(frames, ignore_index=True)) if frames else empty_frame(trajectory=True)


def _frame(rows: pd.DataFrame, key: dict[str, Any]) -> pd.DataFrame:
    """One scored step's rows with the columns of a trajectory store."""
    from ..surveying.store import SURVEY_COLUMNS, TRAJECTORY_COLUMNS

    frame = rows.assign(**{c: key[c] for c in [*SURVEY_COLUMNS, *TRAJECTORY_COLUMNS] if c in key})
    frame = frame[[*SURVEY_COLUMNS, *TRAJECTORY_COLUMNS]]
    frame["head"] = frame["head"].astype("Int64")
    return frame


def _undefined_message(step: int, layer: Any, error: ValueError) -> str:
    """The one warning of a run whose weights left a layer's scores undefined: where, and what to check."""
    from ..errors import NonFiniteWeights

    where = f"qkgeometry: at step {step}, {layer.component} layer {layer.index}"
    if isinstance(error, NonFiniteWeights):
        what = ("holds NaN or Inf in its Q/K weights: check the loss and the learning rate (a diverging run; "
                "gradient clipping or a lower rate)")
    else:
        what = "has an all-zero W_qk: check how W_Q and W_K are initialised (a zero query or key projection)"
    return (f"{where} {what}. Undefined scores are stored and logged as NaN, and training goes on; this warning is "
            "not repeated for this run.")
