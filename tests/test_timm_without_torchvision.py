"""The torchvision stub of tests/timm_without_torchvision.py serves timm's import-time names,
refuses any real use, and leaves nothing behind for other tests."""

from __future__ import annotations

import importlib
import sys

import pytest

from .timm_without_torchvision import StubError, torchvision_stub


def torchvision_entries() -> dict:
    return {k: v for k, v in sys.modules.items() if k == "torchvision" or k.startswith("torchvision.")}  # fmt: skip


def test_the_stub_serves_names_and_refuses_use():
    with torchvision_stub():
        from torchvision.ops.misc import FrozenBatchNorm2d
        from torchvision.transforms import functional
        from torchvision.transforms.functional import InterpolationMode

        modes = {InterpolationMode.NEAREST: "nearest", InterpolationMode.BILINEAR: "bilinear"}
        assert len(modes) == 2  # one key per member, as timm's lookup tables need
        with pytest.raises(StubError, match="FrozenBatchNorm2d is a test stub"):
            FrozenBatchNorm2d(8)

        class Sub(FrozenBatchNorm2d):  # timm subclasses stub classes (MaybeToTensor)
            pass

        with pytest.raises(StubError, match=r"torchvision\.ops\.misc\.FrozenBatchNorm2d is"):
            Sub()
    with pytest.raises(StubError, match="pil_to_tensor is a test stub"):
        functional.pil_to_tensor(None)  # a function used at run time, after the import


def test_the_stub_does_not_outlive_its_block(monkeypatch):
    before, finders = torchvision_entries(), list(sys.meta_path)
    with torchvision_stub():
        importlib.import_module("torchvision.transforms")
        assert "torchvision.transforms" in sys.modules
    assert torchvision_entries() == before and sys.meta_path == finders
    # an entry there before (here: torchvision blocked) is put back as it was
    monkeypatch.setitem(sys.modules, "torchvision", None)
    with torchvision_stub():
        assert importlib.import_module("torchvision").__version__ == "0+stub"
    assert sys.modules["torchvision"] is None
