"""Where the book lives: its repository and branch, read from ``_config.yml`` (``repository:``, the one home of the
URL, which Jupyter Book's repository button also reads), and the addresses built from them: Colab's and GitHub's
links to a file, and the ``pip install`` requirement of a notebook's first cell.

    python -m tools.repository          # the repository's URL
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["BRANCH", "COLAB", "GITHUB", "LEARNER_DIR", "PIP_REQUIREMENT", "REPOSITORY", "REPOSITORY_URL",
           "repository"]

ROOT = Path(__file__).resolve().parents[1]
#: Where the learners' notebooks are written (committed: the Colab badges open them from the repository).
LEARNER_DIR = "learner"


def repository(config: Path = ROOT / "_config.yml") -> tuple[str, str]:
    """``(url, branch)`` of the book's repository, as ``_config.yml`` says (``repository: url, branch``).

    Raises ValueError naming the file when it gives no GitHub URL."""
    import yaml

    section = (yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}).get("repository") or {}
    url, branch = str(section.get("url", "")).rstrip("/"), str(section.get("branch") or "main")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"{config}: repository.url must be a GitHub repository (https://github.com/OWNER/NAME); "
                         f"got {url!r}.")
    return url, branch


#: ``https://github.com/OWNER/NAME`` and its branch
REPOSITORY_URL, BRANCH = repository()
#: ``OWNER/NAME``
REPOSITORY = REPOSITORY_URL.removeprefix("https://github.com/")
COLAB = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}"
GITHUB = f"https://github.com/{REPOSITORY}/blob/{BRANCH}"
#: what a notebook's first cell installs the package from
PIP_REQUIREMENT = f"git+{REPOSITORY_URL}"


if __name__ == "__main__":
    print(REPOSITORY_URL)
