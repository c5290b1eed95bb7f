"""normlab.bench: interleaved timing, ratios to the copy of the same run, results keyed by identifier."""

import math
import time

import pytest
import torch

from normlab import bench

CPU_CONTENDERS = {"copy", "add", "layer_norm", "rms_norm", "normlab_layer_norm", "normlab_rms_norm",
                  "add_layer_norm", "add_rms_norm"}


def test_timeit_calls_warmup_then_repeats_times_inner():
    calls = []
    samples = bench.timeit(lambda: calls.append(1), warmup=2, repeats=4, inner=3)
    assert len(samples) == 4 and len(calls) == 2 + 4 * 3


def test_results_are_keyed_by_identifier_and_labelled_in_the_table():
    res = bench.run(shape=(4, 64), repeats=3)
    assert set(res) == CPU_CONTENDERS
    assert set(bench.LABELS) == set(bench.BYTES)                         # every contender: a label and its bytes
    assert all(key.isidentifier() for key in bench.LABELS)               # keys are names, labels are for display
    assert math.isclose(res["copy"]["ratio_to_copy"], 1.0)
    assert all(r["median_ms"] > 0 and r["iqr_ms"] >= 0 for r in res.values())
    text = str(bench.table(res))
    assert "× copy" in text and "bytes/elem" in text
    for key in res:
        assert bench.LABELS[key] in text
    assert "add_layer_norm" not in text                                  # the identifier is not shown


def test_ratio_is_time_over_the_copy_of_the_same_run(monkeypatch):
    # contenders of known cost: a "copy" that sleeps 20 ms and one four times slower (long enough that
    # a late wake-up on a busy machine, where the test run's three workers share two cores, cannot
    # take the ratio out of its bounds: 20 ms late on each still gives 2.5)
    monkeypatch.setattr(bench, "contenders", lambda x, r, compile_fused=False: {
        "copy": lambda: time.sleep(0.020), "slow": lambda: time.sleep(0.080)})
    res = bench.run(shape=(2, 8), repeats=3, inner=1)
    assert 2.0 < res["slow"]["ratio_to_copy"] < 5.0
    assert res["copy"]["median_ms"] >= 20.0
    assert "slow" in str(bench.table(res))                               # an unknown key shows as itself


def test_gpu_benchmark_is_optional_and_fails_with_a_clear_error():
    if torch.cuda.is_available():
        res = bench.run(shape=(4, 64), repeats=3, device="cuda")
        assert res["copy"]["ratio_to_copy"] == 1.0
    else:
        with pytest.raises(RuntimeError, match="CUDA not available"):
            bench.run(shape=(4, 64), device="cuda")


def test_paired_ratio_is_the_median_of_paired_rounds_and_restores_threads():
    before = torch.get_num_threads()
    calls = []
    ratio = bench.paired_ratio(lambda: (calls.append("a"), time.sleep(0.02)),
                               lambda: (calls.append("b"), time.sleep(0.01)), rounds=5, threads=1)
    assert 1.5 < ratio < 3.0                                   # 20 ms over 10 ms: sleeps only ever run long
    assert calls == ["a", "b"] * 6                             # one untimed call each, then strictly alternating
    assert torch.get_num_threads() == before


def test_paired_ratio_is_the_median_of_the_per_round_ratios(monkeypatch):
    # Scripted timings, a and b alternating: round 1's b was hit by a burst (20), rounds 2-5 ran under
    # rising load that slows a and b alike. Per-round ratios 0.1, 2, 2, 2, 2: their median is 2. These four
    # other ways to compare the two give something else: the fastest a over the fastest b 1.0, the
    # median a over the median b 1.5, the mean of the ratios 1.62, the mean a over the mean b 0.88.
    a, b = [2, 4, 6, 8, 10], [20, 2, 3, 4, 5]
    script = iter(t for pair in zip(a, b) for t in pair)
    monkeypatch.setattr(bench, "timeit", lambda fn, **kw: [next(script)])
    assert bench.paired_ratio(lambda: None, lambda: None, rounds=5, threads=1) == pytest.approx(2.0)


def test_paired_ratio_sets_the_thread_count_while_timing():
    before = torch.get_num_threads()
    seen = []
    bench.paired_ratio(lambda: seen.append(torch.get_num_threads()), lambda: None, rounds=2, threads=1)
    assert set(seen) == {1}
    assert torch.get_num_threads() == before


def test_unfused_over_fused_times_add_layer_norm_over_layer_norm(monkeypatch):
    assert bench.unfused_over_fused(shape=(4, 256), rounds=3) > 0
    timed = []
    monkeypatch.setattr(bench, "paired_ratio", lambda a, b, **kw: timed.append((a, b)) or 2.0)
    real = bench.contenders
    made = {}
    monkeypatch.setattr(bench, "contenders", lambda x, r, compile_fused=False: made.update(real(x, r)) or made)
    assert bench.unfused_over_fused(shape=(4, 256), rounds=3) == 2.0
    assert timed == [(made["add_layer_norm"], made["layer_norm"])]


# --- the GPU record (tools/gpu_bench.py on a lent GPU; 04 quotes it) ----------------------------------

def test_gpu_record_kernel_matches_torch_on_the_gpu():
    """The hand-written Triton kernel, compiled for the GPU: h = x + r exactly; y within float32 rounding
    of F.rms_norm in float32, and in bf16/fp16 no further from it than torch's own kernel in that dtype."""
    rec = bench.recorded_gpu()
    assert rec["triton_kernel_available"] and len(rec["kernel_errors"]) == 18
    for row in rec["kernel_errors"]:
        assert row["h_equal"], row
        if row["dtype"] == "float32":
            assert row["y_max_abs_err"] < 1e-5, row
        else:
            assert row["y_max_abs_err"] <= 1.01 * row["y_max_abs_err_torch_same_dtype"] + 1e-7, row


def test_gpu_record_tables_are_consistent():
    rec = bench.recorded_gpu()
    for case, table in rec["do_bench"].items():
        assert set(table) == set(bench.LABELS), case
        copy = table["copy"]["median_ms"]
        for key, v in table.items():
            assert abs(v["ratio_to_copy"] - v["median_ms"] / copy) < 1e-9, (case, key)
        # the byte model's prediction, measured: the fused kernel (16 B/elem) beats the unfused pair (20 B/elem)
        assert table["add_rms_norm_triton"]["median_ms"] < table["add_rms_norm"]["median_ms"], case
    assert "float32 (64, 512, 1024)" in bench.recorded_gpu_table().title


def test_the_gpu_table_in_04_is_the_record():
    """Every number of 04's GPU table (ms, LN/RMS, unfused/Triton) and the ranges its prose quotes are read
    off normlab/records/gpu_04.json: a new record with other numbers fails here until 04 says them."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "notebooks" / "04_rmsnorm.md").read_text(encoding="utf-8")
    rec = bench.recorded_gpu()["do_bench"]
    ratios = []
    for case, t in rec.items():
        dtype, shape = case.split(" ", 1)
        label = shape.strip("()").replace(", ", "×") + " " + dtype
        ms = {k: t[k]["median_ms"] for k in t}
        ratios.append(ms["add_rms_norm"] / ms["add_rms_norm_triton"])
        row = (f"| {label} | {ms['copy']:.3f} | {ms['layer_norm']:.3f} | {ms['rms_norm']:.3f} | "
               f"{ms['layer_norm'] / ms['rms_norm']:.2f} | {ms['add_rms_norm']:.3f} | {ms['add_rms_norm_triton']:.3f} | "
               f"{ms['add_rms_norm'] / ms['add_rms_norm_triton']:.2f} |")
        assert row in text, row
    assert f"快 {min(ratios):.2f}–{max(ratios):.2f} 倍" in text
    f32 = rec["float32 (64, 512, 1024)"]
    assert f"{f32['layer_norm']['GBps'] / f32['copy']['GBps']:.0%}" in text
    err = max(r["y_max_abs_err"] for r in bench.recorded_gpu()["kernel_errors"] if r["dtype"] == "float32")
    assert f"最多差 {err:.1e}" in text
    assert re.search(r"NVIDIA H200", text) and "H200" in bench.recorded_gpu()["gpu"]
