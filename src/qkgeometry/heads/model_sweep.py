"""Behaviour, geometry and interventions for every head of a model: the recorded runs of book chapter 7.

:func:`sweep` with ``out`` writes, for one offline model (the book records them with
``python -m tools.record_head_sweep --model smollm2-135m --out DIR`` from a checkout):

* ``heads.csv``: one row per head: behaviour scores with their nulls, labels, geometric scores;
* ``interventions.csv`` (decoders): one row per (layer, head, part) with part in ``symmetric``, ``skew``,
  ``symmetric_matched``, ``skew_matched`` (the part rescaled to the head's own Frobenius norm) and ``mean``: the
  mean change of the held-out next-token loss over the sequences, its standard error, the head's own behaviour
  scores with that part alone, and its logit spread (``logit_spread``, with the unedited head's in
  ``logit_spread_full``: the mean over query rows of the standard deviation of the logits over the visible keys);
* ``sequence_deltas.csv`` (decoders): the loss change of each sequence, for intervals;
* ``provenance.json``: the command, package versions, seeds, token counts and the CPU time.

:func:`sweep` does the work and is what the chapter calls live on a few heads to show that the recorded numbers
reproduce. Chapter 7.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .behaviour import (
    attention_patterns,
    behaviour_scores,
    label_heads,
    pattern_scores,
    repeat_scores,
    repeated_random_tokens,
    uniform_scores,
)
from .geometry import head_geometry
from .models import DECODERS, FORWARD_MODELS, forward_model, held_out_texts, token_batch
from .surgery import edited_heads, model_rope_spec

__all__ = ["INTERVENTION_PARTS", "SweepSettings", "behaviour_table", "intervene", "layer_inputs", "logit_spread",
           "settings_for", "split_half_tables", "sweep", "tail_logits"]

INTERVENTION_PARTS = ("symmetric", "skew", "symmetric_matched", "skew_matched", "mean")
#: Behaviour scores reported for an edited head.
EDIT_SCORES = ("previous", "current", "first", "duplicate", "induction")


class SweepSettings(dict):
    """Sizes of a run (a dict, written into the provenance): ``n_texts`` held-out texts of ``length`` tokens,
    ``n_repeat`` repeated random sequences of ``2·half`` tokens, and the random seeds of the texts and the sequences."""


def settings_for(alias: str, quick: bool = False) -> SweepSettings:
    """The recorded sizes for ``alias`` (``quick``: a smaller set for a live check). Chapter 7."""
    n_texts, length = (4, 32) if quick else (6, 48)
    return SweepSettings(n_texts=n_texts, length=length, n_repeat=4 if quick else 6, half=16 if quick else 24,
                         text_seed=7, repeat_seed=0)


def _inputs(alias, tokenizer, s: SweepSettings):
    causal = alias in DECODERS
    texts = held_out_texts(s["n_texts"], seed=s["text_seed"])
    text_ids = token_batch(tokenizer, texts, s["length"])
    if causal:
        prefix = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    else:
        prefix = [tokenizer.cls_token_id]
    vocab = len(tokenizer)
    rep = repeated_random_tokens(vocab, s["n_repeat"], s["half"], s["repeat_seed"], prefix=prefix)
    ctl = repeated_random_tokens(vocab, s["n_repeat"], s["half"], s["repeat_seed"], prefix=prefix, repeat=False)
    return causal, text_ids, rep, ctl, len(prefix)


def behaviour_table(alias: str, model, tokenizer, s: SweepSettings) -> pd.DataFrame:
    """Behaviour scores, nulls, labels and geometry of every head of ``alias``: the ``heads.csv`` table."""
    causal, text_ids, rep, ctl, offset = _inputs(alias, tokenizer, s)
    scores = behaviour_scores(model, text_ids, rep, ctl, s["half"], offset, causal)
    nulls = uniform_scores(s["length"], causal)
    labelled = label_heads(scores, nulls, causal)
    geometry = head_geometry(model)
    table = labelled.merge(geometry, on=["layer", "head"])
    table.insert(0, "model", alias)
    table["rotary"] = model_rope_spec(model, 0) is not None
    table["has_bias"] = bool(np.isfinite(table["key_bias"]).all())
    for k, v in nulls.items():
        table[f"{k}_chance"] = v
    return table


def split_half_tables(alias: str, model, tokenizer, s: SweepSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The behaviour scores and labels of every head made twice, from the first and from the second half of the
    held-out texts and of the repeated (and control) sequences of ``s``: ``(first, second)``, two
    :func:`~qkgeometry.heads.behaviour.label_heads` frames of the same heads in the same order. Chapter 7."""
    causal, text_ids, rep, ctl, offset = _inputs(alias, tokenizer, s)
    if min(len(text_ids), len(rep)) < 2:
        raise ValueError("settings: a split-half check needs at least 2 texts and 2 repeated sequences.")
    text = attention_patterns(model, text_ids)
    rep_p = attention_patterns(model, rep)
    ctl_p = attention_patterns(model, ctl)
    nulls = uniform_scores(s["length"], causal)
    halves = []
    for pick in (slice(0, len(text_ids) // 2), slice(len(text_ids) // 2, None)):
        rpick = slice(0, len(rep) // 2) if pick.start == 0 else slice(len(rep) // 2, None)
        frames = []
        for layer in sorted(text):
            f = pattern_scores(text[layer][pick], causal)
            r = repeat_scores(rep_p[layer][rpick], s["half"], offset)
            c = repeat_scores(ctl_p[layer][rpick], s["half"], offset)
            f["duplicate"], f["induction"] = r["duplicate"].to_numpy(), r["induction"].to_numpy()
            f["duplicate_null"], f["induction_null"] = c["duplicate"].to_numpy(), c["induction"].to_numpy()
            f.insert(0, "layer", layer)
            frames.append(f)
        halves.append(label_heads(pd.concat(frames, ignore_index=True), nulls, causal))
    return halves[0], halves[1]


def layer_inputs(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """The input of every decoder layer of a Llama- or Qwen2-style causal LM on ``ids`` (run inside
    :func:`~qkgeometry.heads.surgery.edited_heads` to record what a forward pass records). Chapter 7."""
    inputs: list[torch.Tensor] = []
    hooks = [layer.register_forward_pre_hook(
        lambda _m, args, kwargs: inputs.append((kwargs.get("hidden_states", args[0] if args else None)).detach()),
        with_kwargs=True) for layer in model.model.layers]
    try:
        model.model(ids, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return inputs


def tail_logits(model, hidden: torch.Tensor, start: int, stop: int | None = None) -> torch.Tensor | None:
    """Run decoder layers ``start .. stop − 1`` (default: to the end, then the final norm and the LM head) on
    ``hidden``, the input of layer ``start``, with the causal mask. Editing a head of layer ``start`` changes
    nothing before it, so a sweep re-runs only this tail. Run it inside
    :func:`~qkgeometry.heads.surgery.edited_heads` (its attention code reads the mask given here). Returns the
    logits, or None when ``stop`` ends before the last layer. Chapter 7."""
    inner = model.model
    t = hidden.shape[1]
    pos = torch.arange(t)[None]
    rope = inner.rotary_emb(hidden, position_ids=pos)
    mask = torch.full((t, t), float("-inf"), dtype=hidden.dtype).triu(1)[None, None]
    layers = inner.layers[start:stop]
    h = hidden
    for layer in layers:
        h = layer(h, attention_mask=mask, position_embeddings=rope, position_ids=pos, use_cache=False)
        if isinstance(h, tuple):
            h = h[0]
    if stop is not None and stop < len(inner.layers):
        return None
    return model.lm_head(inner.norm(h))


def logit_spread(logits: np.ndarray, skip: int = 4) -> float:
    """How hot a head is: the mean, over query rows ``i ≥ skip`` and sequences, of the standard deviation of its
    pre-softmax logits over the keys the row can see (masked entries, ``-inf`` or below ``-1e30``, are left out;
    a row shift does not change it, as it does not change the softmax). ``logits``: (sequences, T, T). Chapter 7."""
    a = np.asarray(logits, dtype=np.float64)
    if a.ndim != 3 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"logits: expected (sequences, T, T); got shape {a.shape}.")
    visible = np.isfinite(a) & (a > -1e30)
    rows = []
    for i in range(skip, a.shape[-1]):
        v = visible[:, i]
        if v[0].sum() < 2:
            continue
        x = np.where(v, a[:, i], np.nan)
        rows.append(np.nanstd(x, axis=-1))
    return float(np.mean(rows))


def _sequence_losses(logits: torch.Tensor, ids: torch.Tensor) -> np.ndarray:
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2).to(torch.float64), ids[:, 1:],
                                             reduction="none")
    return loss.mean(-1).numpy()


def intervene(alias: str, model, tokenizer, s: SweepSettings, heads: Iterable[tuple[int, int]] | None = None,
              parts: Sequence[str] = INTERVENTION_PARTS, flush=None,
              flush_every: int = 10) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cut each head of ``heads`` (default: all) to each of ``parts`` in turn, inside the real decoder.

    One forward pass per (head, part) over the held-out texts and the repeated random sequences together; the
    loss change is paired by sequence against the unedited model, and the head's own behaviour scores are read
    from the same pass. ``mean`` uses the head's mean output over the held-out texts' tokens. ``flush``: called
    with the two frames so far every ``flush_every`` heads (a long run keeps what it has done). Returns
    ``(interventions, sequence_deltas)``. Chapter 7."""
    if alias not in DECODERS:
        raise ValueError(f"alias: interventions need a decoder's next-token loss; choose from {', '.join(DECODERS)}.")
    causal, text_ids, rep, _, offset = _inputs(alias, tokenizer, s)
    n_text = len(text_ids)
    cfg = model.config
    if heads is None:
        heads = [(layer, h) for layer in range(cfg.num_hidden_layers) for h in range(cfg.num_attention_heads)]
    heads = list(heads)
    every = {layer: tuple(range(cfg.num_attention_heads)) for layer in range(cfg.num_hidden_layers)}
    with torch.no_grad():
        with edited_heads(model, record=every, record_logits=True, record_means=True) as states:
            text_in = layer_inputs(model, text_ids)
            means = {(st.layer, h): v for st in states for h, v in st.output_means.items()}
            spread_full = {(st.layer, h): logit_spread(v) for st in states for h, v in st.logits.items()}
            base = _sequence_losses(tail_logits(model, text_in[0], 0), text_ids)
        with edited_heads(model):
            rep_in = layer_inputs(model, rep)
        rows, seq_rows = [], []
        for layer, h in heads:
            for part in parts:
                with edited_heads(model, {(layer, h): part}, record={layer: (h,)}, means=means,
                                  record_logits=True) as states:
                    text_logits = tail_logits(model, text_in[layer], layer)
                    text_pattern = states[layer].patterns[h]
                    spread = logit_spread(states[layer].logits[h])
                    tail_logits(model, rep_in[layer], layer, layer + 1)
                    rep_pattern = states[layer].patterns[h]
                losses = _sequence_losses(text_logits, text_ids)
                deltas = losses - base
                pos = pattern_scores(text_pattern[:, None], causal).iloc[0]
                r = repeat_scores(rep_pattern[:, None], s["half"], offset).iloc[0]
                row = {"model": alias, "layer": layer, "head": h, "part": part,
                       "loss_delta": float(deltas.mean()),
                       "loss_delta_se": float(deltas.std(ddof=1) / np.sqrt(n_text)),
                       "base_loss": float(base.mean()), "logit_spread": spread,
                       "logit_spread_full": spread_full[(layer, h)]}
                for k in EDIT_SCORES:
                    row[k] = float(r[k]) if k in ("duplicate", "induction") else float(pos[k])
                rows.append(row)
                seq_rows.extend({"layer": layer, "head": h, "part": part, "sequence": i, "loss_delta": float(d)}
                                for i, d in enumerate(deltas))
            done = len(rows) // len(parts)
            if flush is not None and done % flush_every == 0:
                flush(pd.DataFrame(rows), pd.DataFrame(seq_rows))
    return pd.DataFrame(rows), pd.DataFrame(seq_rows)


def sweep(alias: str, out: Path | None = None, quick: bool = False, heads=None, interventions: bool = True,
          threads: int = 1, command: str | None = None) -> dict[str, pd.DataFrame]:
    """The full run for ``alias``: :func:`behaviour_table` and, for decoders, :func:`intervene`; written under
    ``out`` with provenance when given (``command``: the command line to record there; default: this call).
    Chapter 7."""
    if alias not in FORWARD_MODELS:
        raise ValueError(f"--model: {alias!r} has no forward pass; choose from {', '.join(FORWARD_MODELS)}.")
    torch.set_num_threads(threads)
    t0, c0 = time.time(), time.process_time()
    model, tokenizer = forward_model(alias)
    s = settings_for(alias, quick)
    result = {"heads": behaviour_table(alias, model, tokenizer, s)}

    def write(partial: bool = False):
        if out is None:
            return
        import transformers

        from .. import __version__

        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        for name, frame in result.items():
            frame.to_csv(folder / f"{name}.csv", index=False, float_format="%.6g")
        prov = {"command": command or f"qkgeometry.heads.model_sweep.sweep({alias!r})",
                "model": alias, "settings": dict(s), "threads": threads,
                "text_tokens": s["n_texts"] * s["length"], "repeat_tokens": s["n_repeat"] * (2 * s["half"] + 1),
                "heads_edited": 0 if "interventions" not in result else int(len(result["interventions"])
                                                                                // len(INTERVENTION_PARTS)),
                "intervention_parts": list(INTERVENTION_PARTS),
                "versions": {"qkgeometry": __version__, "torch": torch.__version__,
                             "transformers": transformers.__version__, "numpy": np.__version__,
                             "python": platform.python_version()},
                "complete": not partial,
                "wall_seconds": round(time.time() - t0, 1), "cpu_seconds": round(time.process_time() - c0, 1)}
        if "interventions" in result:
            prov["head_order"] = "all heads in a random order (seed 0), so that a partial run is a random sample"
        (folder / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n")

    write(partial=interventions and alias in DECODERS)
    if interventions and alias in DECODERS:
        if heads is None:
            cfg = model.config
            heads = [(layer, h) for layer in range(cfg.num_hidden_layers) for h in range(cfg.num_attention_heads)]
            heads = [heads[i] for i in np.random.default_rng(0).permutation(len(heads))]

        def flush(a, b):
            result["interventions"], result["sequence_deltas"] = a, b
            write(partial=True)

        result["interventions"], result["sequence_deltas"] = intervene(alias, model, tokenizer, s, heads,
                                                                       flush=flush if out is not None else None)
        write()
    return result
