"""The landing page's "Answers at a glance": each chapter's question, its answer, how strong the evidence is, and the
caveat a reader should keep, one short paragraph per chapter (a list that reads on a phone as on a laptop).

The questions and caveats are written here, in a teacher's words; the answers and the evidence are the chapters' own
sentences and counts, read from the executed chapters of the same build (their glued values, through the book's
number formatter), so the list cannot disagree with the chapters. A chapter whose answer is a theorem says so.

:func:`glance_table` returns the list as MyST Markdown; the book build writes it to
``book/_generated/glance.md``, which ``book/intro.md`` includes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import myst
from .commonmark import Context, markdown_to_commonmark
from .numbering import chapter_labels


@dataclass(frozen=True)
class Glance:
    """One chapter's row: ``answer`` and ``evidence`` are MyST that quote the chapter's glued values."""

    stem: str
    question: str
    answer: str
    evidence: str
    caveat: str


GLANCES = (
    Glance("01_toeplitz_decomposition", "Can a head's query–key form be split into a “similar” and an “ordered” part?",
           "Yes, always and uniquely: a symmetric part that scores a pair the same both ways and a skew part that "
           "scores it with opposite signs; their energies add up.",
           "Proved (theorems with proofs), and checked numerically on real heads.",
           "The split is exact; what each part *does* to attention also depends on the tokens it sees."),
    Glance("02_scores", "How do we measure each part, and what does chance look like?",
           "Two scores, symmetry and directionality, computed from small Gram matrices for any model; for random "
           "forms symmetry sits tightly near 0, directionality scatters widely.",
           "Proved, and checked against simulated random forms of every shape the book uses.",
           "One layer's directionality says little on its own: read it across many layers."),
    Glance("03_gradient_bias", "Does causal training make the query–key form more directional?",
           "{glue:text}`front3_head`",
           "{glue:text}`fair_n` training seeds per objective, each objective from the same starts on the same text, "
           "read at a step fixed before the runs.",
           "Small models on a CPU; a difference may appear at larger scale or longer training."),
    Glance("04_model_survey", "Are trained encoders symmetric and decoders directional?",
           "Symmetry {glue:text}`sym_strength`; directionality {glue:text}`dir_strength`.",
           "The authors' {glue:text}`paper_sym_n_encoder` encoder and {glue:text}`paper_sym_n_decoder` decoder "
           "stacks, counted by model and by family, and the models this book scores itself.",
           "Models differ in many ways besides their mask; a survey shows association, not cause."),
    Glance("05_symmetric_init", "Does starting from $W_Q = W_K$ speed up training?",
           "{glue:text}`front_head` {glue:text}`front_loss` {glue:text}`front_speed`",
           "Small encoders trained from scratch, each start paired by training seed on the same data (the pairing is "
           "checked by code); four control starts, each changing one property of the symmetric one, test what "
           "causes the gap.",
           "Small encoders at one learning rate; the paper's larger speed-ups rest on one run per start."),
    Glance("06_beyond_the_paper", "How far from chance is a trained layer, and what does one number per layer miss?",
           "Measured against an exact null, {glue:text}`front6_chance`.",
           "Exact null laws (proved), checked by simulation; every layer of the offline models.",
           "With rotary position embeddings the paper's score describes only a token and its key at one position."),
    Glance("07_head_behaviour", "What does a head's geometry say about its job?",
           "{glue:text}`front7_head`",
           "{glue:text}`n_heads_all` heads of {glue:text}`n_models_all` models, hypotheses written before the "
           "numbers, Holm's correction within each family.",
           "{glue:text}`front7_firm`"),
    Glance("08_geometry_before_function", "Does a head's geometry change before it starts doing its job?",
           "{glue:text}`plain_answer`",
           "{glue:text}`n_repeat` small transformers trained from scratch, one per training seed, every head's "
           "geometry and behaviour recorded at the same steps; the lag read as stated before the runs, with its "
           "specification curve.",
           "Two-layer attention-only models on synthetic sequences; heads that form later, or in larger models, "
           "may change in another order. Where the copying heads look was measured after the runs, on a third of "
           "them."),
)


def _render(text: str, ctx: Context) -> str:
    """One part of a chapter's line: the MyST of ``text`` with its glued values written in, on one line."""
    rendered = markdown_to_commonmark(text, ctx).strip()
    return " ".join(rendered.split())


def glance_table(root: Path, executed: Path) -> str:
    """The list (MyST Markdown) for the chapters of ``root`` executed in ``executed``; chapters that were not
    executed are left out."""
    root, executed = Path(root), Path(executed)
    sources = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    labels = chapter_labels(sources, root / "book" / "references.bib")
    lines = []
    for glance in GLANCES:
        run = executed / f"{glance.stem}.ipynb"
        if not run.is_file():
            continue
        values = myst.glued_outputs(myst.read_notebook(run))
        chapter = labels.chapters[glance.stem]
        ctx = Context(chapter, labels, values, "full", links="book")
        answer, evidence, caveat = (_render(t, ctx) for t in (glance.answer, glance.evidence, glance.caveat))
        lines.append(f"- {{doc}}`Chapter {chapter.number} <../notebooks/{glance.stem}>`: *{glance.question}* "
                     f"{answer} **The evidence:** {evidence} **Keep in mind:** {caveat}")
    return "\n".join(lines) + "\n"


def write_glance(root: Path, executed: Path, out_dir: Path) -> Path:
    """Write :func:`glance_table` to ``out_dir/glance.md`` and return its path."""
    out = Path(out_dir) / "glance.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(glance_table(root, executed), encoding="utf-8")
    return out
