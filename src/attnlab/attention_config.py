"""``AttentionConfig``: a model's attention settings, one typed object passed down whole.

Blocks, encoders and model configurations carry one :class:`AttentionConfig` instead of a
free-form ``dict`` of keyword arguments, so a misspelt option is an error where it is written
(``--model.encoder.attention.kernel=performer`` on the command line) rather than deep inside a
constructor, and every layer of a model is built from the same settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from .backends import check_backend_name
from .efficient import KERNELS, check_kernel_options, kernel_options, make_kernel
from .efficient.local import check_backend as check_sparse_backend
from .functional import NORMALIZATIONS, SCORES
from .kernels import ExactKernel

__all__ = ["AttentionConfig"]


@dataclass
class AttentionConfig:
    """Which attention maths every :class:`~attnlab.MultiHeadAttention` of a model runs.

    Args:
        score: relevance score: ``"scaled_dot"``, ``"dot"`` or ``"additive"``.
        normalize: ``"softmax"``, ``"relu"``, ``"sigmoid"`` or ``"none"``.
        backend: exact-attention backend: ``"auto"``, ``"reference"``, ``"sdpa"``, ``"flex"``
            or ``"chunked"``; with a sparse kernel (local, longformer, bigbird) how that kernel
            computes (also ``"banded"`` or ``"exact"``).
        kernel: ``None`` for exact attention, or the registered name of an efficient kernel
            (``"performer"``, ``"linformer"``, ...), which replaces the exact maths. (A kernel
            module, which blocks copy into each layer, is accepted unchecked.)
        kernel_options: that kernel's constructor options (e.g. ``{"features": 128}``).

    Raises:
        ValueError: at construction, naming the field, for an unknown score, normalisation,
            backend or kernel (listing the valid choices), a kernel option the kernel does not
            have (listing its options), or kernel options without a kernel.
    """

    score: str = "scaled_dot"
    normalize: str = "softmax"
    backend: str = "auto"
    kernel: str | None = None
    kernel_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kernel_options and self.kernel is None:
            raise ValueError(
                f"attention.kernel_options {sorted(self.kernel_options)} need attention.kernel "
                "(a kernel name)"
            )
        checks = [
            ("score", lambda: SCORES.get(self.score)),
            ("normalize", lambda: NORMALIZATIONS.get(self.normalize)),
        ]
        if isinstance(self.kernel, str):
            checks += [
                ("kernel", lambda: KERNELS.get(self.kernel)),
                ("kernel_options", self._check_kernel_options),
                ("backend", self._check_kernel_backend),
            ]
        elif self.kernel is None:
            checks.append(("backend", lambda: check_backend_name(self.backend)))
        checks.append(("kernel", self._check_kernel_request))
        for name, check in checks:
            try:
                check()
            except ValueError as err:
                raise ValueError(f"attention.{name}: {err}") from None

    def _check_kernel_request(self) -> None:
        if self.kernel is None:
            return
        if self.score != "scaled_dot" or self.normalize != "softmax":
            raise ValueError(
                "kernel= replaces the exact attention maths; leave score and normalize at their "
                "defaults when you choose a kernel"
            )
        if isinstance(self.kernel, nn.Module):
            if self.kernel_options:
                raise ValueError("kernel options go to a kernel built by name, not to a module")
            if self.backend != "auto":
                name = getattr(self.kernel, "name", type(self.kernel).__name__)
                raise ValueError(
                    f"backend={self.backend!r}: kernel {name!r} has no backend choice (a kernel "
                    "module computes as it was built); leave backend='auto'"
                )

    def build_kernel(
        self, *, dim: int, heads: int, dropout: float = 0.0, score: nn.Module | None = None
    ) -> nn.Module:
        """The attention kernel of these settings for ``heads`` heads of width ``dim``:
        :class:`~attnlab.kernels.ExactKernel` (with ``dropout`` on its weights, and ``score``,
        a score module the caller registers, e.g. the additive score's parameters), the named
        efficient kernel, or the kernel module given.

        Raises:
            ValueError: ``dropout > 0`` with an efficient kernel (it forms no weights).
        """
        if self.kernel is None:
            return ExactKernel(dim=dim, heads=heads, score=score or self.score,
                               normalize=self.normalize, backend=self.backend, dropout=dropout)  # fmt: skip
        if dropout > 0:
            raise ValueError(
                f"dropout={dropout}: efficient kernels never form attention weights, so there "
                "is nothing to drop; use dropout=0 with kernel= (residual dropout in the blocks "
                "still applies)"
            )
        if isinstance(self.kernel, nn.Module):
            return self.kernel
        backend = {} if self.backend == "auto" else {"backend": self.backend}
        return make_kernel(self.kernel, dim=dim, heads=heads, **self.kernel_options, **backend)

    def _check_kernel_options(self) -> None:
        check_kernel_options(self.kernel, self.kernel_options)
        if "backend" in self.kernel_options:
            raise ValueError(
                f"kernel {self.kernel!r}: set how it computes as attention.backend, not as "
                "a kernel option"
            )

    def _check_kernel_backend(self) -> None:
        if self.backend == "auto":
            return
        if "backend" not in kernel_options(self.kernel):
            with_one = [n for n in KERNELS.names() if "backend" in kernel_options(n)]
            raise ValueError(
                f"kernel {self.kernel!r} has no backend choice; leave it 'auto' (kernels with "
                f"one: {', '.join(with_one)})"
            )
        check_sparse_backend(self.backend)

    def layer_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~attnlab.MultiHeadAttention` for these settings."""
        kwargs: dict[str, Any] = {
            "score": self.score, "normalize": self.normalize, "backend": self.backend,
        }  # fmt: skip
        if self.kernel is not None:
            kwargs.update(kernel=self.kernel, **self.kernel_options)
        return kwargs
