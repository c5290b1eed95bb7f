"""Synthetic tasks: targets checked against plain-Python definitions."""

import pytest
import torch

from normlab.tasks import TASKS, make_task


def test_reverse_and_sort_and_modadd_by_hand():
    g = torch.Generator().manual_seed(0)
    for name in TASKS:
        x, y = make_task(name, vocab=7, seq_len=5).batch(4, g)
        assert x.shape == y.shape == (4, 5) and x.dtype == torch.long
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            if name == "reverse":
                assert row_y == row_x[::-1]
            elif name == "sort":
                assert row_y == sorted(row_x)
            else:
                assert row_y == [sum(row_x[: t + 1]) % 7 for t in range(5)]
        assert 0 <= x.min() and x.max() < 7


def test_same_generator_seed_same_batch():
    t = make_task("reverse")
    a = t.batch(3, torch.Generator().manual_seed(1))[0]
    b = t.batch(3, torch.Generator().manual_seed(1))[0]
    assert torch.equal(a, b)


@pytest.mark.parametrize("kwargs", [dict(name="copy"), dict(name="sort", vocab=1), dict(name="sort", seq_len=1.5)])
def test_bad_task_arguments(kwargs):
    with pytest.raises(ValueError, match="task|vocab"):
        make_task(**kwargs)
