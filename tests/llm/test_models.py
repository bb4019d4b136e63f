"""Assembling a split GGUF model from numbered part packages (fake packages written on the fly)."""

from __future__ import annotations

import hashlib
import sys

import pytest

from arag.llm.models import MODELS, ModelUnavailable, SplitModel, ensure_model


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    blobs = [b"GGUF" + bytes([i]) * (1000 + i) for i in range(3)]
    site = tmp_path / "site"
    for i, blob in enumerate(blobs, 1):
        pkg = site / f"fakemodel_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(blob)
    monkeypatch.syspath_prepend(str(site))
    data = b"".join(blobs)
    return SplitModel("fake", "fakemodel_part", "fakemodel-part", "1.0", 3, len(data), hashlib.sha256(data).hexdigest(), "none"), data


def test_assemble_verify_and_reuse(fake_parts, tmp_path):
    model, data = fake_parts
    path = ensure_model(model, directory=tmp_path / "cache")
    assert path.read_bytes() == data and path.name == "fake.gguf"
    assert [p.name for p in path.parent.iterdir()] == ["fake.gguf"]  # no temporary file left
    mtime = path.stat().st_mtime_ns
    assert ensure_model(model, directory=tmp_path / "cache", verify=True).stat().st_mtime_ns == mtime
    path.write_bytes(b"x" * len(data))  # corrupted, same size: caught with verify=True and rebuilt
    assert ensure_model(model, directory=tmp_path / "cache", verify=True).read_bytes() == data


def test_hash_mismatch_leaves_nothing(fake_parts, tmp_path):
    model, _ = fake_parts
    bad = SplitModel(**{**vars(model), "sha256": "0" * 64})
    with pytest.raises(ModelUnavailable, match="SHA-256"):
        ensure_model(bad, directory=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_missing_parts_name_the_pip_command(tmp_path):
    model = SplitModel("ghost", "no_such_pkg_part", "no-such-pkg-part", "2.0", 2, 10, "0" * 64, "none")
    with pytest.raises(ModelUnavailable, match="pip install no-such-pkg-part1==2.0 no-such-pkg-part2==2.0"):
        ensure_model(model, directory=tmp_path)
    with pytest.raises(ModelUnavailable, match="unknown model"):
        ensure_model("nope")


def test_registered_models_are_pinned():
    m = MODELS["qwen2.5-coder-1.5b-instruct"]
    assert m.parts == 22 and m.version == "0.2.0" and len(m.sha256) == 64
