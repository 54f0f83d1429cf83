"""Sphinx extension: serve MathJax 3 from the book's own ``_static`` folder, so math renders without network.

By default Sphinx loads MathJax from a CDN, and offline readers see raw TeX. This extension takes MathJax 3 from the
PyPI package ``django-static-mathjax`` (import name ``mathjax``; no Django needed), copies the CommonHTML build into
``<html>/_static/mathjax/`` when the build finishes, and points ``mathjax_path`` at it.

Configuration (``_config.yml`` → ``sphinx.config``): ``offline_mathjax_entry`` (default ``tex-chtml.js``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Where the copy lives inside the HTML output's ``_static`` folder.
STATIC_SUBDIR = "mathjax"
#: Sub-folders of MathJax's ``es5`` build that the CommonHTML entry point may load lazily (fonts, TeX extensions,
#: the accessibility menu and its speech-rule engine).
LAZY_PARTS = ("a11y", "adaptors", "input", "output", "sre", "ui")


def mathjax_source() -> Path:
    """The ``es5`` folder of the installed MathJax 3 (from ``django-static-mathjax``)."""
    try:
        import mathjax  # django-static-mathjax
    except ImportError as e:  # pragma: no cover - exercised only without the package
        raise ExtensionError(
            "offline_mathjax: the MathJax package is missing. Install it with `pip install django-static-mathjax` "
            "(part of the `book` extra: `pip install -e .[book]`).") from e
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not es5.is_dir():
        raise ExtensionError(f"offline_mathjax: no MathJax 3 build found at {es5}; reinstall django-static-mathjax.")
    return es5


def _configure(app: Sphinx, config: Any) -> None:
    entry = config.offline_mathjax_entry
    if not (mathjax_source() / entry).is_file():
        raise ExtensionError(f"offline_mathjax: {entry!r} is not part of the installed MathJax build.")
    # Relative paths are resolved against _static by Sphinx's add_js_file.
    config.mathjax_path = f"{STATIC_SUBDIR}/{entry}"


def _copy(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    src = mathjax_source()
    dst = Path(app.outdir) / "_static" / STATIC_SUBDIR
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / app.config.offline_mathjax_entry, dst / app.config.offline_mathjax_entry)
    for part in LAZY_PARTS:
        if (src / part).is_dir():
            shutil.copytree(src / part, dst / part, dirs_exist_ok=True)
    logger.info(f"offline_mathjax: copied MathJax 3 to {dst}")


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.mathjax")
    app.add_config_value("offline_mathjax_entry", "tex-chtml.js", "html")
    # Priority > 800 so that we run after sphinx.ext.mathjax and jupyter-book have set their defaults.
    app.connect("config-inited", _configure, priority=900)
    app.connect("build-finished", _copy)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
