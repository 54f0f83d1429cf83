"""The pieces of the Colab-like run of the chapters (tests/book/test_colab_like.py), usable on their own:

    python tests/colab_like.py [--chapters 01 06] [--checkout PATH] [--keep DIR]
    python tests/colab_like.py --overlay DIR     # only a fresh venv at DIR over Colab's stack (built if need be)

* Colab's stack: a base venv built once on Colab's Python (3.13; ``QKG_COLAB_PYTHON`` names another) with the
  versions Colab's own list (tools/colab/pip-freeze.txt) gives the packages the book touches (``python -m
  tools.floors pins colab``, the whole list as constraints), torch of Colab's version (its CPU wheel where the
  PyTorch index answers, else PyPI's wheel of the same version) and papermill to run the chapters;
* every chapter in a fresh runtime of its own: a new venv that sees the base venv's packages as Colab's preinstalled
  ones (and its pip, as on Colab), a new home folder (an empty Hugging Face cache) and an empty pip cache, so that
  nothing one chapter installed or downloaded is there for the next; the package and what Colab lacks come
  from PyPI through the chapter's own first cell, its GitHub URL replaced by ``git+file://localhost/<checkout>``
  (the committed state of the checkout: commit before running);
* what the first cell installed is read from the chapter's venv afterwards: a package Colab's list has, installed
  again (replaced, upgraded or downgraded), fails the chapter (:func:`replaced_packages`);
* a chapter that runs past its time limit is killed with its kernel and recorded as failed; the next one runs;
* the chapters copied to a temporary folder outside the checkout, run by papermill in quick mode;
* a stand-in ``google.colab`` module, imported at interpreter start (``sitecustomize``), so the Colab branches run;
* the loopback Hub emulator serving the chapters' models under their real Hub ids, built from the offline packages
  (the GGUF decoders, SmolLM2 and Qwen2.5-Coder, are converted once to the safetensors layout of their Hub repos
  and cached).

Each chapter's wall time (its first cell's too), the bytes it fetched from the emulator and from PyPI, and what pip
installed are returned (and printed by the script).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None  # tools/, when run as a script
from tools.floors import COLAB_LIST  # noqa: E402  Colab's own list of what its runtime ships (tools/colab/README.md)
from tools.repository import PIP_REQUIREMENT  # noqa: E402  the repository, as _config.yml names it

#: every chapter of the book (notebooks/NN_*.ipynb), each run in a fresh runtime of its own
DEFAULT_CHAPTERS = tuple(sorted({p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}))
#: what runs the chapters, beside Colab's packages in the base venv (Colab runs notebooks its own way)
RUNNER = ("papermill",)
#: torch's CPU wheels (Colab's CPU runtime has ``+cpu``); PyPI's wheel of the same version is the fallback
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: what each chapter's first cell installs the package from (replaced by the checkout's own URL)
GITHUB = PIP_REQUIREMENT


@dataclass
class ChapterRun:
    chapter: str
    seconds: float
    hub_bytes: int
    hub_requests: int
    ok: bool
    error: str = ""
    #: the first cell's time (installing the package and what the chapter names there), from papermill's record
    install_seconds: float = float("nan")
    #: what pip installed into the chapter's runtime (name -> version) and the bytes it downloaded from PyPI
    #: (None: PyPI could not be asked)
    pip_changes: dict[str, str] = field(default_factory=dict)
    pip_bytes: int | None = 0
    #: the packages of Colab's list that the first cell installed again ("name old -> new")
    replaced: list[str] = field(default_factory=list)
    timed_out: bool = False


def pip_cache() -> Path:
    """pip's own cache (``$PIP_CACHE_DIR`` or ``~/.cache/pip``): the wheels pip already downloaded are reused."""
    return Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")


def persistent_cache() -> Path:
    """Where the base venv and the converted Hub models are kept between runs (git-ignored)."""
    path = Path(os.environ.get("QKG_COLAB_CACHE", ROOT / ".cache" / "colab-like"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pip(python: Path, args: list[str], pip_cache: Path, timeout: float, quiet_failure: bool = False) -> None:
    """``pip install --quiet ARGS``; ``quiet_failure``: its output is kept back (a failure that has a fallback)."""
    env = {**os.environ, "PIP_CACHE_DIR": str(pip_cache), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *args], check=True, env=env, timeout=timeout,
                   capture_output=quiet_failure)


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True, timeout=60)
    return Path(out.stdout.strip())


def colab_python() -> str:
    """Colab's Python (the version its list names in os-info.txt, 3.13): ``$QKG_COLAB_PYTHON``, else the newest
    3.13.x of pyenv, else ``python3.13`` on PATH. Raises RuntimeError saying how to get one."""
    want = _colab_python_version()
    if os.environ.get("QKG_COLAB_PYTHON"):
        return os.environ["QKG_COLAB_PYTHON"]
    pyenv = sorted(Path.home().glob(f".pyenv/versions/{want}.*/bin/python"))
    if pyenv:
        return str(pyenv[-1])
    found = shutil.which(f"python{want}")
    if found and "/shims/" not in found:  # a pyenv shim answers for versions that are not active too
        return found
    raise RuntimeError(f"Colab runs Python {want}, and none was found (python{want} on PATH, or pyenv); install it "
                       "(pyenv install " + want + ") or set QKG_COLAB_PYTHON to one.")


def _colab_python_version() -> str:
    """'3.13' from the ``Python 3.13.15`` line of Colab's os-info.txt."""
    text = (COLAB_LIST.parent / "os-info.txt").read_text(encoding="utf-8")
    m = re.search(r"^Python (\d+\.\d+)", text, re.MULTILINE)
    if m is None:
        raise ValueError(f"{COLAB_LIST.parent / 'os-info.txt'}: no 'Python X.Y' line; copy Colab's file again.")
    return m.group(1)


def _colab_versions():
    from tools import floors

    return floors


def base_venv(cache: Path, timeout: float = 3600) -> Path:
    """Colab's stack, built once and kept in the cache: Colab's Python with the versions of Colab's list for the
    packages the book touches (``tools.floors``: pins, and the whole list as constraints) and for what the package's
    dependencies pull in (resolved with a dry run of pip), Colab's pip, torch of
    Colab's version (the CPU wheel from :data:`TORCH_CPU_INDEX`, else PyPI's wheel of that version, which brings
    its CUDA libraries and runs on the CPU the same), and the runner (:data:`RUNNER`). They play the part of
    Colab's preinstalled packages. Which torch it got is in ``torch.txt`` next to it."""
    import hashlib

    floors = _colab_versions()
    python_exe = colab_python()
    key = hashlib.sha256(COLAB_LIST.read_bytes() + "\n".join([*RUNNER, *_requirements()]).encode()).hexdigest()[:12]
    path = cache / f"colab-base-{Path(python_exe).resolve().parent.parent.name}-{key}"
    python = path / "bin" / "python"
    if (path / ".complete").is_file():
        return python
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([python_exe, "-m", "venv", str(path)], check=True, timeout=300)
    shipped = floors.shipped(COLAB_LIST)
    (path / "colab-constraints.txt").write_text("\n".join(floors.constraints(COLAB_LIST)) + "\n")
    (path / "colab-pins.txt").write_text("\n".join(f"{n}=={v}" for n, v in floors.colab(COLAB_LIST).items()) + "\n")
    _pip(python, [f"pip=={shipped['pip']}"], pip_cache(), timeout)
    torch = shipped["torch"]
    try:  # Colab's own wheel (+cpu) from PyTorch's index
        _pip(python, ["--retries", "0", "--timeout", "20", "--index-url", TORCH_CPU_INDEX, f"torch=={torch}"],
             pip_cache(), timeout, quiet_failure=True)
        got = f"torch {torch} from {TORCH_CPU_INDEX}"
    except subprocess.CalledProcessError:  # PyTorch's index unreachable: the same version from PyPI
        _pip(python, [f"torch=={torch.split('+')[0]}"], pip_cache(), timeout)
        got = f"torch {torch.split('+')[0]} from PyPI ({TORCH_CPU_INDEX} did not answer)"
    _pip(python, ["-c", str(path / "colab-constraints.txt"), "-r", str(path / "colab-pins.txt"), *RUNNER],
         pip_cache(), timeout)
    # what the package's dependencies pull in beyond those (protobuf through onnx, ...), where Colab has it
    closure = _would_install(python, ["-c", str(path / "colab-constraints.txt"), *_requirements()], timeout)
    more = sorted(f"{n}=={shipped[n]}" for n in closure if n in shipped and not n.startswith(("torch", "nvidia-")))
    (path / "colab-closure.txt").write_text("\n".join(more) + "\n")
    if more:
        _pip(python, ["-c", str(path / "colab-constraints.txt"), *more], pip_cache(), timeout)
    (path / "torch.txt").write_text(got + "\n")
    (path / ".complete").write_text("ok\n")
    return python


def _requirements() -> list[str]:
    """The requirements of the package and of its extras a learner's first cell installs (``train``)."""
    floors = _colab_versions()
    project = floors._toml(ROOT / "pyproject.toml")["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["train"]]


def _would_install(python: Path, args: list[str], timeout: float) -> list[str]:
    """The normalised names of what ``pip install ARGS`` would add to ``python``'s environment (a dry run)."""
    floors = _colab_versions()
    env = {**os.environ, "PIP_CACHE_DIR": str(pip_cache()), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    out = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *args],
                         check=True, env=env, timeout=timeout, capture_output=True, text=True)
    return [floors._norm(i["metadata"]["name"]) for i in json.loads(out.stdout)["install"]]


def make_venv(path: Path, cache: Path) -> Path:
    """A fresh venv at ``path`` that also sees the base venv's packages (after its own, as Colab's system packages
    come after what a notebook installs) and uses its pip, as on Colab; returns its python."""
    base = base_venv(cache)
    subprocess.run([str(base.resolve().parent / "python"), "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=300)
    python = path / "bin" / "python"
    (_site_packages(python) / "colab-system-packages.pth").write_text(f"{_site_packages(base)}\n")
    return python


def installed(site_packages: Path) -> dict[str, str]:
    """name -> version of every distribution in ``site_packages`` (names normalised as in Colab's list)."""
    from importlib import metadata

    floors = _colab_versions()
    return {floors._norm(d.metadata["Name"]): d.version for d in metadata.distributions(path=[str(site_packages)])
            if d.metadata["Name"]}


def replaced_packages(shipped: dict[str, str], changes: dict[str, str]) -> list[str]:
    """``"name shipped -> installed"`` for each package of Colab's list (``shipped``: name -> version) that a first
    cell installed (``changes``: what pip put into the chapter's runtime, name -> version): upgraded, downgraded
    or reinstalled, it replaced what Colab ships under every package built against it.

    >>> replaced_packages({"transformers": "5.15.0", "numpy": "2.1.3"}, {"gguf": "0.19.0", "transformers": "5.25.0"})
    ['transformers 5.15.0 -> 5.25.0']
    """
    floors = _colab_versions()
    ships = {floors._norm(n): v for n, v in shipped.items()}
    return [f"{n} {ships[floors._norm(n)]} -> {v}" for n, v in sorted(changes.items()) if floors._norm(n) in ships]


#: PyPI's JSON simple index (PEP 691, with file sizes: PEP 700), where a Colab runtime's pip downloads from
PYPI_SIMPLE = "https://pypi.org/simple"


def _pypi_files(name: str, timeout: float = 30) -> list[dict]:
    """The files PyPI lists for ``name`` (filename, size, ...), from its JSON simple index; none for a name PyPI
    does not have."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{PYPI_SIMPLE}/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)["files"]
    except urllib.error.HTTPError as e:
        if e.code == 404:  # not on PyPI (installed from git)
            return []
        raise


def interpreter_tags(python: Path | str) -> list[str]:
    """The wheel tags ``python`` accepts, best first (as its pip ranks them)."""
    code = "from pip._vendor.packaging.tags import sys_tags; print('\\n'.join(map(str, sys_tags())))"
    return subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True,
                          timeout=60).stdout.split()


def download_bytes(changes: dict[str, str], tags: list[str], files=_pypi_files) -> int | None:
    """The bytes pip downloads from PyPI for what it installed (``changes``: name -> version): for each, the size
    of the file of that version pip picks, the wheel whose tag ``tags`` (the interpreter's, best first) ranks
    highest, else the source archive. A package PyPI does not list (installed from git) counts 0; None when
    PyPI cannot be asked. (Read from PyPI's index rather than from pip's cache: a proxy that forbids caching
    leaves the cache empty.)

    >>> listing = {"gguf": [{"filename": "gguf-0.19.0-py3-none-any.whl", "size": 92000},
    ...                     {"filename": "gguf-0.19.0.tar.gz", "size": 90000},
    ...                     {"filename": "gguf-0.18.0-py3-none-any.whl", "size": 1}]}
    >>> download_bytes({"gguf": "0.19.0", "mine": "0.1.0"}, ["py3-none-any"], lambda n: listing.get(n, []))
    92000
    """
    from packaging import utils as names
    from packaging.version import Version

    rank = {tag: k for k, tag in enumerate(tags)}
    total = 0
    for name, version in changes.items():
        try:
            listed = files(name)
        except OSError:
            return None
        best, sdist = None, None
        for f in listed:
            with contextlib.suppress(names.InvalidWheelFilename, names.InvalidSdistFilename, ValueError):
                if f["filename"].endswith(".whl"):
                    _, v, _, file_tags = names.parse_wheel_filename(f["filename"])
                    k = min((rank.get(str(t), len(rank)) for t in file_tags), default=len(rank))
                    if v == Version(version) and k < len(rank) and (best is None or k < best[0]):
                        best = (k, int(f["size"]))
                elif names.parse_sdist_filename(f["filename"])[1] == Version(version):
                    sdist = int(f["size"])
        total += best[1] if best else sdist or 0
    return total


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found through /proc; a kernel started in a session of its own
    is still a child of the runner that started it)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(proc: subprocess.Popen) -> None:
    """Kill ``proc`` (started with ``start_new_session=True``), its process group and every process below it
    with the groups they lead (jupyter starts each kernel in a session of its own), then reap it."""
    pids = [proc.pid, *_descendants(proc.pid)]
    ours = os.getpgid(0)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group != ours:  # never this process's own group
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def run_notebook(python: Path | str, src: Path, out: Path, cwd: Path, env: dict[str, str], timeout: float,
                 parameters: dict[str, object] | None = None) -> tuple[int, str, bool]:
    """Run notebook ``src`` with papermill under ``python`` (quick mode and ``parameters``), writing ``out``;
    returns (exit status, its output, timed out?). Past ``timeout`` seconds the runner, its kernel and whatever
    they started are killed (:func:`kill_tree`) and the run counts as failed."""
    args = [str(python), "-m", "papermill", str(src), str(out), "-k", "python3", "--cwd", str(cwd),
            "--no-progress-bar", "--log-level", "ERROR"]
    for name, value in (parameters or {}).items():
        args += ["-p", name, str(value)]
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output, False
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        output = proc.stdout.read() if proc.stdout else ""
        return -9, f"{output}\nTimeoutError: the notebook ran past {timeout:.0f} s and was killed with its kernel", True


def colab_stub(folder: Path) -> Path:
    """A folder that, on PYTHONPATH, makes every Python started with it see ``google.colab`` in sys.modules (a
    namespace ``google`` package, so that ``google.protobuf`` still imports)."""
    (folder / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (folder / "google" / "colab" / "__init__.py").write_text('"""Stand-in for Colab\'s module (a test)."""\n')
    (folder / "sitecustomize.py").write_text("import google.colab  # noqa: F401  (the Colab branch of every cell)\n")
    return folder


def checkout_url(checkout: Path) -> str:
    """A pip-installable git URL of ``checkout`` that pip 23 also accepts (``file:///`` without a host it rejects)."""
    return f"git+file://localhost{checkout.resolve()}"


def prepare_chapter(src: Path, dst: Path, checkout: Path) -> Path:
    """Copy a chapter, its first cell installing from ``checkout`` instead of GitHub. Nothing else changes."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    first = "".join(nb["cells"][0]["source"])
    if GITHUB not in first:
        raise AssertionError(f"{src.name}: the first cell does not install from {GITHUB}")
    nb["cells"][0]["source"] = [line.replace(GITHUB, checkout_url(checkout)) for line in nb["cells"][0]["source"]]
    dst.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return dst


def gguf_hub_folder(alias: str, cache: Path) -> Path:
    """Offline decoder ``alias`` (a GGUF file) in the layout of its Hub repo (config.json, model.safetensors in bf16,
    tokenizer), made once: dequantised weights, not the Hub's bytes; the same tensor names and shapes."""
    from qkgeometry import catalogue

    out = cache / "hub" / catalogue.OFFLINE_MODELS[alias].hub_id.split("/")[-1]
    if (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file():
        return out
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = catalogue.offline_path(alias)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.bfloat16)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


#: the offline models whose Hub copies the chapters read on Colab (``model_source``, ``forward_model``), and how
#: the emulator gets each: their folder as it ships, or the GGUF decoders converted to their Hub layout
HUB_FOLDERS = ("minilm-l6", "mpnet-base")
HUB_FROM_GGUF = ("smollm2-135m", "qwen2.5-coder-0.5b")


#: chapter 3's Colab cell (``USE_HUB = True``) reads this repo across training; the emulator serves it as tiny
#: GPT-NeoX checkpoints of random weights on three step branches (the plumbing of the cell, not Pythia's numbers)
TRAJECTORY_REPO = "EleutherAI/pythia-160m"
TRAJECTORY_STEPS = (0, 1000, 143000)
#: the chapters run with ``USE_HUB = True``, as a Colab learner would set it
USE_HUB_CHAPTERS = ("03",)


def trajectory_checkpoints(cache: Path) -> dict[str, Path]:
    """Branch name -> folder of each checkpoint of :data:`TRAJECTORY_REPO` (built once, kept in the cache)."""
    from tiny_models import tiny_folder

    root = cache / "pythia-tiny-trajectory"
    if not (root / ".complete").is_file():
        for k, step in enumerate(TRAJECTORY_STEPS):
            tiny_folder("gpt_neox", root / f"step{step}", seed=k, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, vocab_size=99, max_position_embeddings=64)
        (root / ".complete").write_text("ok\n")
    return {f"step{step}": root / f"step{step}" for step in TRAJECTORY_STEPS}


def hub_repos(cache: Path) -> dict[str, Path]:
    """Hub id -> local folder for every model a chapter reads from the Hub on Colab."""
    from qkgeometry import catalogue

    out = {catalogue.OFFLINE_MODELS[a].hub_id: catalogue.offline_path(a) for a in HUB_FOLDERS}
    return out | {catalogue.OFFLINE_MODELS[a].hub_id: gguf_hub_folder(a, cache) for a in HUB_FROM_GGUF}


def chapter_path(chapter: str, notebooks: Path) -> Path:
    (path,) = sorted(notebooks.glob(f"{chapter}_*.ipynb"))
    return path


def run_chapters(chapters: tuple[str, ...] = DEFAULT_CHAPTERS, checkout: Path = ROOT, work: Path | None = None,
                 notebooks: Path | None = None, timeout: float = 1500, keep: bool = False) -> list[ChapterRun]:
    """Run ``chapters`` Colab-like (see the module docstring), each in a fresh runtime of its own under ``work`` (a
    new temporary folder by default): its own venv (seeing only the base packages), home folder (so an empty Hugging
    Face cache and qkgeometry cache), pip cache and working folder. Nothing one chapter installs, downloads or writes
    is seen by the next. ``notebooks``: where the chapters are read from (the checkout's by default); ``keep``: keep
    each chapter's runtime after it ran (removed otherwise: chapter 4's holds 1.5 GB of offline models)."""
    import tempfile

    from hub_emulator import HubEmulator

    cache = persistent_cache()
    work = Path(tempfile.mkdtemp(prefix="qkg-colab-")) if work is None else work
    if checkout.resolve() in work.resolve().parents or work.resolve() == checkout.resolve():
        raise ValueError(f"work: {work} is inside the checkout; the chapters must run outside it.")
    base_venv(cache)
    shipped = _colab_versions().shipped(COLAB_LIST)
    runs = []
    with HubEmulator() as hub:
        for hub_id, folder in hub_repos(cache).items():
            hub.add_repo(hub_id, folder, on_disk=True)
        for branch, folder in trajectory_checkpoints(cache).items():
            hub.add_repo(TRAJECTORY_REPO, folder, on_disk=True, branch=branch)
        for chapter in chapters:
            runtime = work / f"runtime-{chapter}"
            if runtime.exists():
                raise ValueError(f"work: {runtime} exists; every chapter needs a fresh runtime (use a new folder).")
            runtime.mkdir(parents=True)
            python = make_venv(runtime / "venv", cache)
            stub = colab_stub(runtime / "colab-stub")
            content = runtime / "content"  # Colab's working folder
            home = runtime / "home"
            content.mkdir()
            home.mkdir()
            env = {k: v for k, v in os.environ.items()
                   if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "PYTHONPATH", "VIRTUAL_ENV",
                                "QKGEOMETRY_CACHE", "MPLBACKEND", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",
                                "XDG_CACHE_HOME", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_EXTRA_INDEX_URL",
                                "PIP_INDEX_URL", "PIP_CONSTRAINT", "PIP_NO_CACHE_DIR")}
            # pip as on Colab: from PyPI itself (no configured mirror or local wheel folder; what it downloads is
            # then in its cache, and counted), into an empty cache
            env.update(HOME=str(home), PYTHONPATH=str(stub), HF_ENDPOINT=hub.url, PIP_CONFIG_FILE=os.devnull,
                       PIP_CACHE_DIR=str(runtime / "pip-cache"), PIP_DISABLE_PIP_VERSION_CHECK="1",
                       PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}")
            src = prepare_chapter(chapter_path(chapter, notebooks or checkout / "notebooks"),
                                  content / f"{chapter}.ipynb", checkout)
            hub.reset_log()
            t0 = time.time()
            code, output, timed_out = run_notebook(
                python, src, content / f"{chapter}.out.ipynb", content, env, timeout,
                {"QUICK": True, **({"USE_HUB": True} if chapter in USE_HUB_CHAPTERS else {})})
            seconds = time.time() - t0
            changes = installed(_site_packages(python))
            replaced = replaced_packages(shipped, changes)
            error = "" if code == 0 else _cell_error(output)
            if replaced:
                error = "; ".join(filter(None, [error, "the first cell replaced what Colab ships: " + ", ".join(replaced)]))
            runs.append(ChapterRun(chapter, seconds, hub.bytes_served(), len(hub.data_requests()),
                                   code == 0 and not replaced, error,
                                   _first_cell_seconds(content / f"{chapter}.out.ipynb"), changes,
                                   download_bytes(changes, interpreter_tags(python)), replaced, timed_out))
            if not keep:
                shutil.rmtree(runtime, ignore_errors=True)
    return runs


def _first_cell_seconds(executed: Path) -> float:
    """The first cell's duration as papermill recorded it in the executed notebook (NaN when there is none)."""
    try:
        cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
        # papermill puts a banner cell first when a cell failed: the chapter's first cell is its first code cell
        first = next(c for c in cells if c["cell_type"] == "code")
        return float(first["metadata"]["papermill"]["duration"])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return float("nan")


def _cell_error(text: str) -> str:
    """The exception line of papermill's failure output (e.g. ``NameError: name 'enc_r' is not defined``)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in text.splitlines()]
    errors = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b.*:", ln)]
    return errors[-1] if errors else "\n".join(lines[-15:])


def report(runs: list[ChapterRun]) -> str:
    rows = [f"chapter {r.chapter}: {'ok' if r.ok else 'FAILED'} in {r.seconds:.0f} s "
            f"(first cell {r.install_seconds:.0f} s), "
            f"{r.hub_bytes / 1e6:.1f} MB in {r.hub_requests} data requests from the Hub, "
            + (f"{r.pip_bytes / 1e6:.1f} MB" if r.pip_bytes is not None else "unknown bytes")
            + " from PyPI; pip installed "
            + (", ".join(f"{n}=={v}" for n, v in sorted(r.pip_changes.items())) or "nothing")
            + f"; replaced of Colab's: {', '.join(r.replaced) or 'nothing'}"
            + (f" ({r.error})" if r.error else "") for r in runs]
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover
    import argparse

    sys.path.insert(0, str(Path(__file__).parent))
    sys.path.insert(0, str(ROOT))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="+", default=list(DEFAULT_CHAPTERS))
    parser.add_argument("--checkout", type=Path, default=ROOT)
    parser.add_argument("--notebooks", type=Path, default=None, help="read the chapters from here")
    parser.add_argument("--keep", type=Path, default=None, help="a new work folder to use and keep")
    parser.add_argument("--overlay", type=Path, default=None,
                        help="only make a fresh venv at this path over Colab's stack, and say which torch it has")
    a = parser.parse_args()
    if a.overlay is not None:
        cache = persistent_cache()
        python = make_venv(a.overlay, cache)
        print(f"{python}: over Colab's stack at {base_venv(cache).parent.parent}, "
              f"{(base_venv(cache).parent.parent / 'torch.txt').read_text().strip()}")
        sys.exit(0)
    if a.keep is not None:
        a.keep.mkdir(parents=True)
    result = run_chapters(tuple(a.chapters), a.checkout, a.keep, a.notebooks, keep=a.keep is not None)
    print(report(result))
    sys.exit(0 if all(r.ok for r in result) else 1)
