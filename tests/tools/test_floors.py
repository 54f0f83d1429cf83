"""The version sets of `make test-floors` and `make test-colab-versions` (tools/floors.py)."""

from __future__ import annotations

import re
from importlib import metadata

import pytest

from tools import floors


def test_lowest_pins_every_runtime_dependency_but_torch_at_its_floor():
    pins = floors.lowest(extras=())
    declared = floors._toml(floors.ROOT / "pyproject.toml")["project"]["dependencies"]
    names = [re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0] for d in declared]
    assert set(pins) == set(names) - {"torch"}
    for req in declared:
        name, _, floor = req.partition(">=")
        if name != "torch":
            assert pins[name] == floor.split(",")[0].strip()


def test_a_dependency_without_a_single_floor_is_refused(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["numpy>=1.24", "pandas<3"]\n')
    with pytest.raises(ValueError, match=r"dependency 'pandas<3' has no single '>=' floor"):
        floors.lowest(pyproject)
    pyproject.write_text('[project]\ndependencies = ["numpy>=1.24; python_version < \'3.12\'", "torch>=2.1"]\n')
    assert floors.lowest(pyproject) == {"numpy": "1.24"}


def test_colab_versions_come_from_colabs_own_list(tmp_path):
    pins = floors.colab()
    assert {"transformers", "huggingface-hub", "numpy", "pandas", "ipykernel"} <= set(pins) and "torch" not in pins
    listed = floors.COLAB_LIST.read_text()
    for name, version in pins.items():  # each as Colab's list has it
        assert re.search(rf"^{name.replace('-', '[-_.]')}=={re.escape(version)}$", listed, re.MULTILINE | re.I), name
    assert "gguf" not in pins  # Colab lacks it: the first cell installs it
    freeze = tmp_path / "pip-freeze.txt"
    freeze.write_text("# a comment\nNumPy==2.1.3\ntorch @ https://x/torch-2.11.0%2Bcpu-cp313-cp313-linux_x86_64.whl\n"
                      "pkg @ git+https://x/pkg@abc\n")
    assert floors.shipped(freeze) == {"numpy": "2.1.3", "torch": "2.11.0+cpu"}
    assert floors.constraints(freeze) == ["numpy==2.1.3"]
    freeze.write_text("# nothing listed\n")
    with pytest.raises(ValueError, match="lists no 'name==version' line"):
        floors.shipped(freeze)


def test_a_floor_may_exclude_versions_above_it(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["huggingface_hub>=1.27,!=2.0.*,!=2.1.*"]\n')
    assert floors.lowest(pyproject) == {"huggingface_hub": "1.27"}
    pyproject.write_text('[project]\ndependencies = ["huggingface_hub>=1.27,<3"]\n')
    with pytest.raises(ValueError, match="no single '>=' floor"):
        floors.lowest(pyproject)


def test_mismatches_name_each_package():
    have = metadata.version("numpy")
    assert floors.mismatches({"numpy": have}) == []
    assert floors.mismatches({"numpy": have + ".0"}) == []  # 2.0 and 2.0.0 are one version
    assert floors.mismatches({"numpy": "0.1"}) == [f"numpy: {have} installed, 0.1 wanted"]
    assert floors.mismatches({"no-such-package-here": "1"}) == ["no-such-package-here: not installed, 1 wanted"]


def test_main_prints_pins_and_fails_a_check_that_does_not_hold(capsys, monkeypatch):
    monkeypatch.setattr(floors, "lowest", lambda: {"numpy": "0.1"})
    monkeypatch.setattr(floors, "TOOLING_CAPS", {"pyarrow": "<26"})
    assert floors.main(["pins", "lowest"]) == 0 and capsys.readouterr().out.split() == ["numpy==0.1", "pyarrow<26"]
    assert floors.main(["check", "lowest"]) == 1
    assert "numpy: " in capsys.readouterr().err
    assert floors.main(["report", "lowest"]) == 0
    assert "replaced: numpy" in capsys.readouterr().out
    assert floors.main(["nope"]) == 2


def test_the_floors_include_the_cluster_extra_so_the_dask_tests_run_there():
    project = floors._toml(floors.ROOT / "pyproject.toml")["project"]
    (distributed,) = project["optional-dependencies"]["cluster"]
    assert floors.lowest()["distributed"] == distributed.partition(">=")[2]


def test_the_floors_include_the_train_extra_that_the_heads_and_integrations_tests_need():
    """transformers' Trainer and its GGUF loading import accelerate: the floor run installs the train extra at its
    floors, which are at least what the floor of transformers (5.15) itself requires: ``tokenizers>=0.22.0`` and,
    for its Trainer, ``accelerate>=1.1.0`` (its METADATA; in fact 1.3, whose unwrap_model takes keep_torch_compile=)."""
    from packaging.version import Version

    lowest = floors.lowest()
    assert "train" in floors.EXTRAS and Version(lowest["transformers"]) == Version("5.15")
    assert Version(lowest["tokenizers"]) >= Version("0.22.1") and Version(lowest["accelerate"]) >= Version("1.3")


def test_pre_releases_and_trailing_zeros_are_compared_as_versions(monkeypatch):
    monkeypatch.setattr(floors.metadata, "version", lambda name: {"a": "1.0rc1", "b": "2.0.0", "c": "1.10"}[name])
    assert floors.mismatches({"a": "1.0"}) == ["a: 1.0rc1 installed, 1.0 wanted"]  # a pre-release is not the release
    assert floors.mismatches({"a": "1.0rc1", "b": "2", "c": "1.10.0"}) == []
    assert floors.mismatches({"c": "1.1"}) == ["c: 1.10 installed, 1.1 wanted"]


@pytest.mark.parametrize("target", ["test-floors", "test-colab-versions"])
def test_the_version_runs_install_the_cluster_and_train_extras_and_fail_a_skipped_dask_test(target):
    makefile = (floors.ROOT / "Makefile").read_text()
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
    assert '-e ".[dev,cluster,train]"' in recipe and "QKG_REQUIRE_DASK=1" in recipe
