"""The version sets the package is checked against beside the book's exact pins (``make test-floors``,
``make test-colab-versions``):

* ``lowest``: every runtime dependency of pyproject.toml at its declared floor (``name>=X`` becomes ``name==X``), the
  "lowest-direct" resolution: the floors in pyproject.toml are only true while this set installs and passes;
* ``colab``: the versions of transformers, huggingface_hub, numpy and pandas that a Colab runtime ships, as stated
  in the header of book-constraints.txt (a line ``# Colab: name==version name==version ...``); pip is then left to
  keep or upgrade them as it does on Colab, where the first cell installs the package over them.

    python -m tools.floors pins lowest       # the constraints, one per line (torch left out: installed first)
    python -m tools.floors check lowest      # exit 1, naming each package, where the running Python has others
    python -m tools.floors report colab      # which of them pip kept and which it replaced (never fails)

torch is left out of both: it is installed from the CPU wheel first, as in `make install` (Colab keeps its own).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: installed on its own, before the package (the CPU wheel; Colab keeps its own)
SKIP = frozenset({"torch"})
_FLOOR = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][^,;\s]*)\s*$")


def _toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads(path.read_text(encoding="utf-8"))


def lowest(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """name -> floor of every runtime dependency of ``pyproject`` (``[project] dependencies``) but torch.

    Raises ValueError naming the requirement when one has no single ``>=`` floor (nothing to pin).
    """
    pins = {}
    for req in _toml(pyproject)["project"]["dependencies"]:
        m = _FLOOR.match(req.split(";")[0])
        if m is None:
            raise ValueError(f"{pyproject}: dependency {req!r} has no single '>=' floor; write it as 'name>=X' so "
                             "that the lowest-versions check can pin it.")
        if _norm(m.group(1)) not in SKIP:
            pins[m.group(1)] = m.group(2)
    return pins


def colab(constraints: Path = ROOT / "book-constraints.txt") -> dict[str, str]:
    """name -> version from the ``# Colab: ...`` line of ``constraints``' header.

    Raises ValueError naming the file when the line is missing or malformed.
    """
    for line in constraints.read_text(encoding="utf-8").splitlines():
        if line.startswith("# Colab:"):
            pins = dict(p.split("==", 1) for p in line.removeprefix("# Colab:").split() if "==" in p)
            if pins:
                return pins
    raise ValueError(f"{constraints}: its header lacks the line '# Colab: name==version ...' (the versions a Colab "
                     "runtime ships); add it.")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def mismatches(pins: dict[str, str]) -> list[str]:
    """One line per pinned package whose installed version differs (or that is not installed)."""
    out = []
    for name, want in pins.items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have is None or _release(have) != _release(want):
            out.append(f"{name}: {f'{have} installed' if have else 'not installed'}, {want} wanted")
    return out


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of ``version`` (``2.0`` and ``2.0.0`` are the same)."""
    parts = [int(p) for p in re.findall(r"\d+", version.split("+")[0].split("rc")[0])]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("pins", "check", "report") or argv[1] not in ("lowest", "colab"):
        print("usage: python -m tools.floors {pins|check|report} {lowest|colab}", file=sys.stderr)
        return 2
    pins = lowest() if argv[1] == "lowest" else colab()
    if argv[0] == "pins":
        print("\n".join(f"{n}=={v}" for n, v in pins.items()))
        return 0
    bad = mismatches(pins)
    if argv[0] == "report":
        kept = [f"{n}=={v}" for n, v in pins.items() if not any(b.startswith(f"{n}:") for b in bad)]
        print(f"{argv[1]} versions kept: {', '.join(kept) or 'none'}; replaced: {'; '.join(bad) or 'none'}")
        return 0
    for line in bad:
        print(f"{argv[1]} versions: {line}", file=sys.stderr)
    if not bad:
        print(f"{argv[1]} versions installed: " + ", ".join(f"{n}=={metadata.version(n)}" for n in pins))
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
