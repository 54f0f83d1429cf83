"""What a learner's notebook shows before it is run: the outputs of the book's own execution of its chapter.

A learner who opens a chapter in Colab reads it before running it (the first cell installs for minutes, chapter 4
downloads models for longer). So each code cell of the learner's notebook carries, as its stored outputs, what the
same cell printed and drew when the book was built: tables, figures, printed lines and every value the text quotes.
Running the cell replaces them, as in any notebook.

What is kept is what a reader sees, in the form the learner's own run would show it (:func:`learner_outputs`):

* figures and tables as they are (PNG, HTML tables, Markdown, plain text);
* an interactive figure as its static picture: the interactive part is a script that a stored notebook does not run
  (Colab does not trust it), so it is dropped and the picture the book also renders stays;
* a value passed to ``glue`` as :func:`qkgeometry.tables.show_value` shows it when the cell runs: ``name: value``;
* nothing that is about the build (the note that says how the numbers were drawn), no warnings on stderr, no errors.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Output MIME types a stored notebook can show without running code.
SHOWN_TYPES = ("image/png", "image/jpeg", "image/svg+xml", "text/html", "text/markdown", "text/latex", "text/plain")
#: The prefix myst-nb's ``glue`` gives the MIME types of the values it records.
GLUE_PREFIX = "application/papermill.record/"
_BUILD_NOTE = re.compile(r"""class="[^"]*\bqkg-mode-note\b""")
_SCRIPT = re.compile(r"<script\b", re.I)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _glue_output(output: Mapping[str, Any]) -> list[dict]:
    """A value recorded by ``glue``, shown as the learner's ``glue`` (``show_value``) shows it: ``name: value``."""
    from qkgeometry.tables import tidy_number

    name = str(output.get("metadata", {}).get("scrapbook", {}).get("name", ""))
    data = {k[len(GLUE_PREFIX):]: v for k, v in output.get("data", {}).items() if k.startswith(GLUE_PREFIX)}
    if set(data) <= {"text/plain"}:
        text = _text(data.get("text/plain", "")).strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]  # a string's repr: the learner's glue prints the string itself
        else:
            try:
                number = float(text)
            except ValueError:
                pass
            else:
                text = tidy_number(int(number) if number.is_integer() and "." not in text else number, 3)
        return [{"output_type": "stream", "name": "stdout", "text": f"{name}: {text}\n"}]
    shown = _rich_output({"output_type": "display_data", "data": data, "metadata": {}})
    if not shown:
        return []
    return [{"output_type": "stream", "name": "stdout", "text": f"{name}:\n"}, *shown]


def _rich_output(output: Mapping[str, Any]) -> list[dict]:
    data = {k: copy.deepcopy(v) for k, v in output.get("data", {}).items() if k in SHOWN_TYPES}
    html = _text(data.get("text/html", ""))
    if html and _BUILD_NOTE.search(html):
        return []
    if html and _SCRIPT.search(html):
        del data["text/html"]  # an interactive figure: its picture stays
        if any(k.startswith("image/") for k in data):
            data.pop("text/plain", None)
    if not data or (set(data) == {"text/plain"} and not _text(data["text/plain"]).strip()):
        return []
    metadata = {k: v for k, v in output.get("metadata", {}).items() if k in {m for m in data if m.startswith("image/")}}
    return [{"output_type": "display_data", "data": data, "metadata": copy.deepcopy(metadata)}]


def learner_outputs(outputs: Iterable[Mapping[str, Any]]) -> list[dict]:
    """The stored outputs of one executed cell, as its learner's cell carries them (see the module's docstring)."""
    kept: list[dict] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            if output.get("name") == "stdout" and _text(output.get("text", "")).strip():
                kept.append({"output_type": "stream", "name": "stdout", "text": _text(output["text"])})
        elif kind in ("display_data", "execute_result"):
            if "scrapbook" in output.get("metadata", {}):
                kept.extend(_glue_output(output))
            else:
                kept.extend(_rich_output(output))
    return kept


def outputs_by_cell(executed) -> dict[str, list[dict]]:
    """The learner's outputs of every code cell of an executed chapter, by cell id (papermill keeps the ids)."""
    return {str(cell.get("id", "")): learner_outputs(cell.get("outputs", []))
            for cell in executed.cells if cell.cell_type == "code" and cell.get("id")}


def shown_texts(cell) -> list[str]:
    """Every text a cell's stored outputs show (plain text, Markdown and printed lines), for checks."""
    texts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            texts.append(_text(output.get("text", "")))
        for mime in ("text/markdown", "text/plain"):
            if mime in output.get("data", {}):
                texts.append(_text(output["data"][mime]))
    return texts
