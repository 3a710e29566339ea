"""Compiled CPU operators for the layers PyTorch runs slowly on a CPU, each beside the PyTorch
path it replaces (used wherever the compiled one does not apply or could not be built).

* :class:`BatchNormReLU2d`: batch norm then ReLU, fused in training (``batch_norm.py``,
  ``batch_norm_relu.cpp``);
* :class:`MaxPool2x2`: 2x2 max pooling, stride 2 (``max_pool.py``, ``max_pool.cpp``).

The lab's convolutional stems (the image models' ``hybrid`` and ``cnn`` encoders) use both.

They are compiled on first use for this machine's CPU (:mod:`.build`, about 60 s once);
``ATTNLAB_NATIVE=0`` turns them off. They have no double backward (``create_graph=True``
through them raises).
"""

from .batch_norm import BatchNormReLU2d
from .build import unavailable_reason
from .max_pool import MaxPool2x2

__all__ = ["BatchNormReLU2d", "MaxPool2x2", "unavailable_reason"]
