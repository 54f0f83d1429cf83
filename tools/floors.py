"""The version sets the package is checked against beside the book's exact pins (``make test-floors``,
``make test-colab-versions``):

* ``lowest``: every runtime dependency of pyproject.toml, and those of the extras the floor tests need
  (:data:`EXTRAS`: ``cluster``, so that the dask tests run there too, and ``train``, which the heads and
  integrations tests need: transformers' Trainer and its GGUF loading import accelerate), at its declared floor (``name>=X`` becomes
  ``name==X``), the "lowest-direct" resolution: the floors in pyproject.toml are only true while this set installs
  and passes;
* ``colab``: the versions a Colab runtime ships of the packages the book touches, read from Colab's own published
  list (:data:`COLAB_LIST`, ``tools/colab/pip-freeze.txt``, copied with its date and source; its README says how to
  refresh it). "Touches" is computed, not listed: every package that pyproject.toml names (dependencies and every
  extra) and the notebook kernel (:data:`KERNEL`), where Colab's list has it. The whole list also serves as
  constraints (``constraints colab``), so that what those packages pull in has Colab's versions too. pip is then
  left to keep or upgrade them as it does on Colab, where the first cell installs the package over them.

    python -m tools.floors pins lowest       # the constraints, one per line (torch left out: installed first),
                                             # and the caps of :data:`TOOLING_CAPS`
    python -m tools.floors check lowest      # exit 1, naming each package, where the running Python has others
    python -m tools.floors pins colab        # Colab's versions of the packages the book touches
    python -m tools.floors constraints colab # every 'name==version' of Colab's list (for pip -c)
    python -m tools.floors report colab      # which of them pip kept and which it replaced (never fails)
    python -m tools.floors shipped torch     # the version Colab's list gives one package (torch: from its URL)

torch is left out of the pins: it is installed on its own first (the CPU wheel), as in `make install`.
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
EXTRAS = ("cluster", "train")
#: Caps on what the test tooling pulls in, for the lowest set only: packages whose import needs more than a floor
#: of ours while their metadata does not say so, so that the resolver cannot know. pyarrow (through datasets, which
#: transformer-lens and transformers' Trainer import) raises "requires NumPy 2.0" from 26.0 on; 25.0 imports with
#: numpy 1.24.1, the floor.
TOOLING_CAPS = {"pyarrow": "<26"}
#: Colab's own list of the packages its CPU runtime ships (``pip freeze``), copied into the repository
COLAB_LIST = ROOT / "tools" / "colab" / "pip-freeze.txt"
#: what runs a notebook on Colab besides what pyproject.toml names
KERNEL = ("ipykernel", "ipython", "jupyter_client", "pip")


def _toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads(path.read_text(encoding="utf-8"))


def lowest(pyproject: Path = ROOT / "pyproject.toml", extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """name -> floor of every runtime dependency of ``pyproject`` (``[project] dependencies``) and of its
    ``extras``, but torch. A requirement is its ``>=`` floor and, at most, ``!=`` exclusions of versions above it.

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
        floor = [s for s in specs if s.operator == ">="]
        if len(floor) != 1 or any(s.operator != "!=" for s in specs if s not in floor):
            raise ValueError(f"{pyproject}: dependency {req!r} has no single '>=' floor; write it as 'name>=X' "
                             "(with '!=' exclusions at most) so that the lowest-versions check can pin it.")
        if _norm(parsed.name) not in SKIP:
            pins[parsed.name] = floor[0].version
    return pins


def shipped(freeze: Path = COLAB_LIST) -> dict[str, str]:
    """name -> version of every package in ``freeze`` (a ``pip freeze`` listing such as Colab's), names normalised
    (``huggingface-hub``). ``name==version`` lines, and ``name @ URL`` lines whose URL names a wheel (torch's
    ``torch-2.11.0%2Bcpu-...whl`` gives ``2.11.0+cpu``); other ``@`` lines (a git checkout) have no version.

    Raises ValueError naming the file when it lists nothing.
    """
    from urllib.parse import unquote

    out = {}
    for line in freeze.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "==" in line:
            name, _, version = line.partition("==")
            out[_norm(name)] = version.strip()
        elif " @ " in line:
            name, _, url = line.partition(" @ ")
            wheel = unquote(url.rsplit("/", 1)[-1])
            if wheel.endswith(".whl") and wheel.count("-") >= 4:
                out[_norm(name)] = wheel.split("-")[1]
    if not out:
        raise ValueError(f"{freeze}: lists no 'name==version' line; copy Colab's pip-freeze.txt there again.")
    return out


def touched(pyproject: Path = ROOT / "pyproject.toml") -> set[str]:
    """The normalised names of every package pyproject.toml names (dependencies and every extra) and of the
    notebook kernel (:data:`KERNEL`)."""
    from packaging.requirements import Requirement

    project = _toml(pyproject)["project"]
    reqs = [*project["dependencies"], *(r for extra in project.get("optional-dependencies", {}).values() for r in extra)]
    return {_norm(Requirement(r).name) for r in reqs} | {_norm(k) for k in KERNEL}


def colab(freeze: Path = COLAB_LIST, pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """name -> version, from Colab's list ``freeze``, of each package the book touches (:func:`touched`) that Colab
    ships, but torch (installed on its own first)."""
    ships = shipped(freeze)
    return {n: ships[n] for n in sorted(touched(pyproject) & set(ships)) if n not in SKIP}


def constraints(freeze: Path = COLAB_LIST) -> list[str]:
    """Every ``name==version`` line of ``freeze`` (for ``pip install -c``), but torch, the packages built against it
    and the CUDA libraries (installed on their own, with the torch wheel that is found)."""
    own = ("torch", "nvidia-", "cuda-", "triton")
    return [f"{n}=={v}" for n, v in shipped(freeze).items() if not n.startswith(own) and "+" not in v]


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
    if len(argv) == 2 and argv[0] == "constraints" and argv[1] == "colab":
        print("\n".join(constraints()))
        return 0
    if len(argv) == 2 and argv[0] == "shipped":
        version = shipped().get(_norm(argv[1]))
        if version is None:
            print(f"{COLAB_LIST}: Colab's list has no {argv[1]}", file=sys.stderr)
            return 1
        print(version)
        return 0
    if len(argv) != 2 or argv[0] not in ("pins", "check", "report") or argv[1] not in ("lowest", "colab"):
        print("usage: python -m tools.floors {pins|check|report} {lowest|colab} | constraints colab | shipped NAME",
              file=sys.stderr)
        return 2
    pins = lowest() if argv[1] == "lowest" else colab()
    if argv[0] == "pins":
        caps = [f"{n}{c}" for n, c in TOOLING_CAPS.items()] if argv[1] == "lowest" else []
        print("\n".join([*(f"{n}=={v}" for n, v in pins.items()), *caps]))
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
