"""Lesson 01 (residuals): the lesion study of Veit et al. 2016 — delete one block at test time and
see what is left of the accuracy.

The model is ``normlab.models.DigitsNet`` (its ``init=`` chooses Xavier, He or Fixup-style
weights), the data ``normlab.data.digits``, the loop ``normlab.train.train``.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor

from ..models import DigitsNet
from ..train import accuracy

__all__ = ["skip_accuracy", "lesion_accuracy"]


def skip_accuracy(model: DigitsNet, x: Tensor, y: Tensor, skip: Iterable[int] = ()) -> float:
    """Test accuracy with the layers in ``skip`` deleted."""
    return accuracy(model, x, y, skip=tuple(skip))


def lesion_accuracy(model: DigitsNet, x: Tensor, y: Tensor) -> list[float]:
    """Test accuracy with each single block deleted in turn (Veit et al. 2016, §4)."""
    return [skip_accuracy(model, x, y, skip=[i]) for i in range(len(model.stack.blocks))]
