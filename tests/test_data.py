"""normlab.data: digits() against scikit-learn's load_digits read here, and the synthetic tasks'
targets against plain-Python definitions."""

import pytest
import torch

from normlab.data import TASKS, Task, digits, make_task


def test_digits_is_sklearns_load_digits_scaled_and_split():
    from sklearn.datasets import load_digits

    d = load_digits()
    x_tr, y_tr, x_te, y_te = digits()
    assert x_tr.shape == (1200, 64) and x_te.shape == (597, 64) and y_tr.dtype == torch.long
    assert 0 <= x_tr.min() and x_tr.max() <= 1 and set(y_tr.tolist()) == set(range(10))
    # the same (image / 16, label) pairs as sklearn's, each exactly once (k / 16 is exact in float32)
    theirs = sorted((tuple(v / 16.0 for v in img), int(t)) for img, t in zip(d.data.tolist(), d.target.tolist()))
    ours = sorted(zip(map(tuple, torch.cat([x_tr, x_te]).double().tolist()), torch.cat([y_tr, y_te]).tolist()))
    assert ours == theirs


def test_digits_are_load_digits_row_for_row_and_need_no_sklearn_import():
    """digits() reads scikit-learn's file itself: the tensors are bit for bit what load_digits gives,
    shuffled and split as before, and a process that calls it never imports scikit-learn."""
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(3))
    for ours, theirs in zip(digits(n_train=1000, seed=3), (x[perm][:1000], y[perm][:1000], x[perm][1000:], y[perm][1000:])):
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs)
    out = subprocess.run([sys.executable, "-c", "import sys; from normlab.data import digits; digits(); "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))"],
                         capture_output=True, text=True, encoding="utf-8", check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_digits_split_follows_the_seed():
    a, b, c = digits(seed=0), digits(seed=0), digits(seed=1)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert digits(n_train=100)[0].shape == (100, 64) and digits(n_train=100)[2].shape == (1697, 64)


def test_reverse_and_sort_and_modadd_by_hand():
    g = torch.Generator().manual_seed(0)
    for name in TASKS:
        x, y = make_task(name, vocab=7, seq_len=5).batch(4, g)
        assert x.shape == y.shape == (4, 5) and x.dtype == y.dtype == torch.long
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
    assert t == Task("reverse", 16, 12)
    a = t.batch(3, torch.Generator().manual_seed(1))[0]
    b = t.batch(3, torch.Generator().manual_seed(1))[0]
    c = t.batch(3, torch.Generator().manual_seed(2))[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("kwargs", [dict(name="copy"), dict(name="sort", vocab=1), dict(name="sort", seq_len=1.5)])
def test_bad_task_arguments(kwargs):
    with pytest.raises(ValueError, match="task|vocab") as err:
        make_task(**kwargs)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(err.value))


def test_digits_fall_back_to_load_digits_where_the_file_is_elsewhere(monkeypatch):
    """Another layout of scikit-learn (no data/digits.csv.gz where digits() looks): load_digits itself,
    the same tensors."""
    import importlib.util

    expected = digits(seed=2)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    for ours, theirs in zip(digits(seed=2), expected):
        assert torch.equal(ours, theirs)
