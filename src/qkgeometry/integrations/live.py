"""What every training callback shares: score a model held in memory at a training step, keep the rows in a
trajectory store, and return the medians to log. Chapters 3 and 5."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._lazy import LazyModule

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = LazyModule("pandas")

__all__ = ["LIVE_PREFIX", "LiveScorer"]

#: the ``source`` of a row scored during training starts with this (``live:<run>/checkpoint-<step>``): it names no
#: file, so a later ``qkgeometry trajectory`` of the saved checkpoints never mistakes it for one
LIVE_PREFIX = "live:"


class LiveScorer:
    """Scores a model during training and keeps the rows.

    ``store``: a trajectory store (``.sqlite``, or ``.csv``) to append the rows to, or None to keep them in memory
    only (:attr:`frames`). ``every``: score every this many steps (the callbacks' interval). ``run``: the run's
    identity in the store (default: the training's output folder, resolved, plus `` (live)``); two runs are never
    merged in a figure. ``per``, ``num_std`` and ``input_norm`` as for :func:`qkgeometry.score_model`.
    ``prefix``: the name of the logged medians (``qkgeometry/symmetry_median``...).

    Every argument is checked here, before training starts; the store is created when the first rows are written.
    """

    def __init__(self, store: str | Path | None = None, every: int = 100, *, run: str | None = None,
                 per: str = "layer", num_std: float = 2.0, input_norm: str = "raw", prefix: str = "qkgeometry"):
        from .._files import check_writable_file
        from .._validation import check_num_std
        from ..surveying.store import STORE_SUFFIXES

        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"`every` must be a whole number of steps >= 1; got {every!r}.")
        if per not in ("layer", "head"):
            raise ValueError(f"`per` must be 'layer' or 'head'; got {per!r}.")
        if input_norm not in ("raw", "folded"):
            raise ValueError(f"`input_norm` must be 'raw' or 'folded'; got {input_norm!r}.")
        check_num_std(num_std)
        if run is not None and (not isinstance(run, str) or not run.strip()):
            raise ValueError(f"`run` must be a non-empty name for this training run; got {run!r}.")
        if store is not None:
            store = Path(store)
            if store.suffix.lower() not in (".csv", *STORE_SUFFIXES):
                raise ValueError(f"`store` must be a .sqlite store or a .csv file; got {str(store)!r}.")
            check_writable_file(store, "`store`")
        self.store, self.every, self.run = store, every, run
        self.per, self.num_std, self.input_norm, self.prefix = per, float(num_std), input_norm, prefix
        #: the frames scored so far, one per step (also when ``store`` is None)
        self.frames: list[pd.DataFrame] = []

    def due(self, step: int) -> bool:
        """Whether ``step`` is one to score (a multiple of ``every``)."""
        return step % self.every == 0

    def run_of(self, output_dir: str | Path | None) -> str:
        """The run identity rows are stored under: ``run`` if given, else ``output_dir`` resolved + `` (live)``."""
        if self.run is not None:
            return self.run
        return f"{Path(output_dir or '.').resolve()} (live)"

    def score(self, model: Any, step: int, *, run: str, tokens: int | None = None) -> dict[str, float]:
        """Score ``model`` (a ``transformers.PreTrainedModel``, or a QKModel) at ``step``: the rows go to the
        store (replacing any rows this run stored for that step) and to :attr:`frames`; returns the medians over
        layers (or heads) of both scores, named for logging (one pair per attention stack when there are several)."""
        from .._version import __version__
        from ..readers import load_qk
        from ..surveying.store import SURVEY_COLUMNS, SurveyStore

        with load_qk(model, device=_device_of(model), input_norm=self.input_norm) as qk:
            rows = _score_layers(qk, self.per, self.num_std)
            qk_norm, input_norm = qk.qk_norm or "", qk.input_norm
        source = f"{LIVE_PREFIX}{run.removesuffix(' (live)')}/checkpoint-{int(step)}"
        frame = rows.assign(init="pretrained", modality="language", source=source, revision="live",
                            qkgeometry_version=__version__, per=self.per, num_std=self.num_std,
                            qk_norm=qk_norm, input_norm=input_norm)[SURVEY_COLUMNS]
        frame = frame.assign(run=run, checkpoint=f"checkpoint-{int(step)}", stage=None, step=int(step),
                             tokens=None if tokens is None else int(tokens))
        frame["head"] = frame["head"].astype("Int64")
        if self.store is not None:
            with SurveyStore(self.store, what="`store`") as store:
                store.put(frame)
        self.frames.append(frame)
        return self.medians(frame)

    def medians(self, frame: pd.DataFrame) -> dict[str, float]:
        """``{prefix/symmetry_median, prefix/directionality_median}`` of ``frame`` (per attention stack, suffixed
        with its name, when the model has several)."""
        out = {}
        stacks = list(dict.fromkeys(frame["component"]))
        for component in stacks:
            part = frame[frame["component"] == component]
            suffix = "" if len(stacks) == 1 else f"/{component}"
            for score in ("symmetry", "directionality"):
                out[f"{self.prefix}/{score}_median{suffix}"] = float(part[score].median())
        return out

    def trajectory(self) -> pd.DataFrame:
        """Every row scored so far by this scorer, in step order."""
        from ..surveying.store import empty_frame

        return pd.concat(self.frames, ignore_index=True) if self.frames else empty_frame(trajectory=True)


def _device_of(model: Any) -> Any:
    """The CUDA device of the model's first parameter (scoring happens where the weights are), else None (CPU)."""
    try:
        device = next(model.parameters()).device
    except (AttributeError, StopIteration, TypeError):
        return None
    return device if device.type == "cuda" else None


def _score_layers(model: Any, per: str, num_std: float) -> pd.DataFrame:
    """:func:`qkgeometry.surveying.scoring.score_layers` of an in-memory model, each CPU layer's weights seen as
    numpy arrays (no copy): the path a saved checkpoint's weights take, so that a step scored live equals, bit for
    bit, the checkpoint saved at that step scored afterwards (torch and numpy sum float64 products in different
    orders)."""
    import dataclasses

    from ..surveying.scoring import score_layer
    from ..surveying.store import COLUMNS

    rows = []
    for layer in model.iter_layers(convert=False):
        layer = dataclasses.replace(layer, wq=_as_numpy(layer.wq), wk_kv=_as_numpy(layer.wk_kv))
        dims = model.dims(layer.component)
        for row in score_layer(layer, per, num_std):
            rows.append({"model": model.name, "family": model.family, "component": layer.component, **row,
                         "d_model": dims.d_model, "head_dim": dims.head_dim, "n_heads": dims.n_heads,
                         "n_kv_heads": dims.n_kv_heads})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return frame


def _as_numpy(weights: Any) -> Any:
    """A CPU torch tensor of a dtype numpy holds, as a numpy view of the same memory; anything else as it is."""
    import torch

    if isinstance(weights, torch.Tensor) and weights.device.type == "cpu" and weights.dtype in (
            torch.float32, torch.float64, torch.float16):
        return weights.detach().numpy()
    return weights
