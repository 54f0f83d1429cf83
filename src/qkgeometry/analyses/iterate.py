"""One walk over a model's layers and heads, for the analyses (nulls, spectrum, rotary, anatomy).

Every analysis asks the same thing: "for each layer (and each head), give me the factors ``A, B`` of
``W_qk = A Bᵀ`` as float64 numpy arrays". :func:`iter_factors` answers it once, through the public
:class:`qkgeometry.QKModel` / :class:`qkgeometry.QKLayer` API only (iteration, ``layer(i)``, ``index``,
``component``, ``n_heads``, ``factors(head)``), reading each layer as stored (numpy for files, without importing
torch) and widening it to float64 on the CPU (``.detach().to("cpu", torch.float64)`` for a tensor), so it works for
a model read onto a GPU (``load_qk(..., device="cuda")``) and for weights that carry gradients. Conventions (``A = W_Q^h``, ``B = W_K^{g(h)}``, g(h) = h // group size, and
the layer's grouped factors of rank n_kv_heads·head_dim) are on the book's Notation page; chapter 3 introduces
:meth:`qkgeometry.QKLayer.factors`.

>>> import qkgeometry as qg
>>> from qkgeometry.analyses.iterate import iter_factors
>>> with qg.load_qk("offline:minilm-l6") as model:            # doctest: +SKIP
...     for f in iter_factors(model, per="head"):
...         print(f.component, f.layer, f.head, f.a.shape)     # self 0 0 (384, 32) ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from .._arrays import host_float64
from ..model import FactoredQK

__all__ = ["PER", "Factors", "heads_for", "iter_factors", "iter_layers", "opened"]

#: The values of ``per`` that the analyses accept: the layer matrix, every head, or both (layer first).
PER = ("layer", "head", "both")


class Factors(NamedTuple):
    """The factors of one bilinear form ``W_qk = a @ b.T`` of a model.

    ``component``: ``self``, ``encoder``, ``decoder`` or ``cross``; ``layer``: the layer index; ``head``: the query
    head, or None for the layer matrix; ``a``, ``b``: float64 numpy arrays on the CPU, (d_model, head_dim) for a head
    and (d_model, n_kv_heads·head_dim) for the layer.
    """

    component: str
    layer: int
    head: int | None
    a: np.ndarray
    b: np.ndarray

    @property
    def form(self) -> FactoredQK:
        """``(a, b)`` as a :class:`qkgeometry.FactoredQK`, e.g. for ``qg.scores_factored(f.form)``."""
        return FactoredQK(self.a, self.b)


@contextlib.contextmanager
def opened(model: Any) -> Iterator[Any]:
    """``with opened(model) as qk``: a :class:`qkgeometry.QKModel` is used as it is (its owner closes it); anything
    else is a source for :func:`qkgeometry.load_qk`, opened here and closed when the block ends."""
    from ..model import QKModel
    from ..readers import load_qk

    if isinstance(model, QKModel):
        yield model
        return
    with load_qk(model) as qk:
        yield qk


def heads_for(per: str, n_heads: int) -> list[int | None]:
    """The heads that ``per`` asks for: ``[None]`` (the layer), ``[0, …, n_heads − 1]``, or both, layer first."""
    if per not in PER:
        raise ValueError(f"`per` must be 'layer', 'head' or 'both'; got {per!r}.")
    return ([None] if per != "head" else []) + (list(range(n_heads)) if per != "layer" else [])


def iter_layers(model: Any, layers: Iterable[int] | None = None) -> Iterator[Any]:
    """The :class:`qkgeometry.QKLayer` objects of ``model`` (a QKModel), one at a time: all of them, or only those
    with the given ``layers`` indices (read directly with ``model.layer(i)``, not by reading past the others)."""
    if layers is None:
        yield from model
        return
    for index in layers:
        yield model.layer(int(index))


def iter_factors(model: Any, per: str = "layer", layers: Iterable[int] | None = None) -> Iterator[Factors]:
    """:class:`Factors` of every layer matrix (``per="layer"``), every head (``"head"``) or both (``"both"``: each
    layer's matrix, then its heads) of ``model``, a :class:`qkgeometry.QKModel`; ``layers``: layer indices
    (default: all). Layers are read one at a time, so memory holds one layer. To walk a source (a folder, a
    ``.gguf`` file, ``offline:<name>``...), open it first: ``with opened(source) as qk: iter_factors(qk)``.
    """
    heads_for(per, 1)  # check `per` now, not when the first layer is read
    return _walk(model, per, layers)


def _walk(model: Any, per: str, layers: Iterable[int] | None) -> Iterator[Factors]:
    from ..model import QKLayer, QKModel

    # A QKModel's layers as read (numpy for files: no torch import), widened to float64 numpy before any arithmetic
    # (the layer's grouped factors sum query heads: in float64, as the float64 layers would); a model-like object
    # that defines its own layers is read through them.
    own = isinstance(model, QKModel) and type(model).__iter__ is QKModel.__iter__ \
        and type(model).layer is QKModel.layer
    if not own:
        raw = iter_layers(model, layers)
    elif layers is None:
        raw = model.iter_layers(convert=False)
    else:
        raw = (model.layer(int(index), convert=False) for index in layers)
    for stored in raw:
        layer = QKLayer(stored.index, stored.component, host_float64(stored.wq), host_float64(stored.wk_kv))
        for head in heads_for(per, layer.n_heads):
            a, b = layer.factors(head)
            yield Factors(layer.component, int(layer.index), head, host_float64(a), host_float64(b))
