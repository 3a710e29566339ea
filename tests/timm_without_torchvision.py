"""Import timm where no usable torchvision is installed, for the ``from_timm`` tests.

Why: timm requires torchvision, and no torchvision wheel fits the CPU build of torch that
``make install`` pins (the only ones for torch 2.13 are CUDA builds, whose ``_C.so`` links
``libtorch_cuda``: ``import torchvision`` fails with "operator torchvision::nms does not exist").
So ``make install`` installs timm with ``--no-deps``, and :func:`import_timm` imports it against
a stub of torchvision when the real one does not import.

What the stub is: a meta-path finder that serves ``torchvision`` and every ``torchvision.*`` as
an empty package. It only satisfies the names timm reads at import time (``from
torchvision.ops.misc import FrozenBatchNorm2d``, ``class MaybeToTensor(transforms.ToTensor)``,
``InterpolationMode.BILINEAR`` as a dict key, ...): a capitalised name is a class whose class
attributes are placeholder strings, any other name a stub submodule. Nothing of torchvision is
computed: instantiating a stub class or calling a stub raises :class:`StubError`. The ViT path
the tests use (``Attention``, ``Block``, ``Mlp``, ``LayerScale``, ``create_model('vit_*')``)
never calls torchvision; timm uses it for data transforms, datasets, FX feature extraction and
``FrozenBatchNorm2d``.

Scope: the finder is on ``sys.meta_path`` only while timm is imported, and every ``torchvision``
entry of ``sys.modules`` is put back as it was afterwards, so a later ``import torchvision``
(``transformers.is_torchvision_available()``, torch_geometric's image datasets) sees what it
would have seen without this module. timm itself keeps the stub objects it bound.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["StubError", "import_timm", "torchvision_imports", "torchvision_stub"]

_ROOT = "torchvision"


class StubError(RuntimeError):
    """A torchvision stub was used for more than its name."""


def _refuse(name: str):
    raise StubError(
        f"{name} is a test stub (tests/timm_without_torchvision.py): this code path needs a "
        "torchvision built for the installed torch"
    )


class _StubClassMeta(type):
    """Classes whose unknown class attributes are placeholder strings (distinct per name, so
    that timm's ``{InterpolationMode.NEAREST: 'nearest', ...}`` keeps one key per member)."""

    def __getattr__(cls, attr: str) -> str:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return f"<torchvision stub {cls.__module__}.{cls.__qualname__}.{attr}>"


class _StubClass(metaclass=_StubClassMeta):
    def __init__(self, *args, **kwargs) -> None:
        stub = next(c for c in type(self).__mro__ if "_torchvision_stub" in c.__dict__)
        _refuse(f"{stub.__module__}.{stub.__qualname__}")  # also through a timm subclass


class _StubModule(types.ModuleType):
    """A stub package: capitalised attributes are stub classes, the others stub submodules."""

    def __getattr__(self, attr: str):
        if attr.startswith("_"):  # dunders and private names: probes (hasattr), not timm's
            raise AttributeError(attr)
        if attr[:1].isupper():
            namespace = {"__module__": self.__name__, "_torchvision_stub": True}
            value = _StubClassMeta(attr, (_StubClass,), namespace)
        else:
            try:  # a stub submodule while the finder is installed
                value = importlib.import_module(f"{self.__name__}.{attr}")
            except ImportError:  # afterwards: timm used a torchvision function at run time
                _refuse(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value

    def __call__(self, *args, **kwargs):
        _refuse(self.__name__)


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if not _ours(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []  # a package: its submodules are stubs too
        module.__version__ = "0+stub"
        return module

    def exec_module(self, module) -> None:
        pass


def torchvision_imports() -> bool:
    """Whether the real torchvision imports (leaves ``sys.modules`` as a failed import does)."""
    try:
        importlib.import_module(_ROOT)
    except Exception:  # noqa: BLE001 - missing, or built for another torch (RuntimeError)
        return False
    return True


def _ours(name: str) -> bool:
    return name == _ROOT or name.startswith(_ROOT + ".")


@contextmanager
def torchvision_stub() -> Iterator[None]:
    """Within the block, ``import torchvision...`` gives the stub; afterwards ``sys.modules``
    and ``sys.meta_path`` are as before (the real torchvision's entries, if any, restored)."""
    saved = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in saved:
        del sys.modules[name]
    finder = _StubFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


def import_timm(name: str = "timm") -> types.ModuleType:
    """``import name`` (timm or one of its modules): for real when torchvision imports, else
    against :func:`torchvision_stub`.

    Raises ``ModuleNotFoundError`` when timm is not installed, and whatever timm's import raises.
    """
    if name in sys.modules:
        return sys.modules[name]
    if importlib.util.find_spec("timm") is None:
        raise ModuleNotFoundError("No module named 'timm'", name="timm")
    if torchvision_imports():
        return importlib.import_module(name)
    with torchvision_stub():
        return importlib.import_module(name)
