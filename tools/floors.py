"""The version sets the package is checked against beside the book's exact pins (``make test-floors``,
``make test-colab-versions``):

* ``lowest``: every runtime dependency of pyproject.toml, and those of the extras the floor tests need
  (:data:`EXTRAS`: ``cluster``, so that the dask tests run there too), at its declared floor (``name>=X`` becomes
  ``name==X``), the "lowest-direct" resolution: the floors in pyproject.toml are only true while this set installs
  and passes;
* ``colab``: the versions of transformers, huggingface_hub, numpy and pandas that a Colab runtime ships, as stated
  in the header of book-constraints.txt (a line ``# Colab: name==version name==version ...``); pip is then left to
  keep or upgrade them as it does on Colab, where the first cell installs the package over them.

    python -m tools.floors pins lowest       # the constraints, one per line (torch left out: installed first)
    python -m tools.floors check lowest      # exit 1, naming each package, where the running Python has others
    python -m tools.floors report colab      # which of them pip kept and which it replaced (never fails)

torch is left out of both: it is installed from the CPU wheel first, as in `make install` (Colab keeps its own).
Requirements and versions are read with ``packaging`` (``2.0`` and ``2.0.0`` are one version, ``1.0rc1`` is a
pre-release of ``1.0``).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: installed on its own, before the package (the CPU wheel; Colab keeps its own)
SKIP = frozenset({"torch"})
#: extras whose dependencies the floor tests install and pin too (the dask tests need ``cluster``)
EXTRAS = ("cluster",)


def _toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads(path.read_text(encoding="utf-8"))


def lowest(pyproject: Path = ROOT / "pyproject.toml", extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """name -> floor of every runtime dependency of ``pyproject`` (``[project] dependencies``) and of its
    ``extras``, but torch.

    Raises ValueError naming the requirement when one has no single ``>=`` floor (nothing to pin).
    """
    from packaging.requirements import InvalidRequirement, Requirement

    project = _toml(pyproject)["project"]
    optional = project.get("optional-dependencies", {})
    pins = {}
    for req in [*project["dependencies"], *(r for e in extras for r in optional.get(e, ()))]:
        try:
            parsed = Requirement(req)
        except InvalidRequirement as e:
            raise ValueError(f"{pyproject}: dependency {req!r} is not a requirement ({e}); fix it.") from e
        specs = list(parsed.specifier)
        if len(specs) != 1 or specs[0].operator != ">=":
            raise ValueError(f"{pyproject}: dependency {req!r} has no single '>=' floor; write it as 'name>=X' so "
                             "that the lowest-versions check can pin it.")
        if _norm(parsed.name) not in SKIP:
            pins[parsed.name] = specs[0].version
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
    from packaging.version import InvalidVersion, Version

    out = []
    for name, want in pins.items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        try:
            same = have is not None and Version(have) == Version(want)
        except InvalidVersion:
            same = have == want
        if not same:
            out.append(f"{name}: {f'{have} installed' if have else 'not installed'}, {want} wanted")
    return out


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
