"""The comparison's "max" rule counts an element's error past a few rounding steps of its own magnitude (compare.py,
``elem``): a correctly rounded half-precision output whose largest elements are far above its rms passes (a
bfloat16 softmax over 50k columns was flagged on an H200 with the old rule), and an error past the rounding, on a
large element or a small one, is still caught."""

from __future__ import annotations

import math

import pytest
import torch

from kbench_env.measure.compare import DEFAULT_TOLERANCES, compare_outputs, error_figures, tolerance_for


def _heavy_tailed_softmax(rows: int = 64, cols: int = 50257, seed: int = 0) -> torch.Tensor:
    """Softmax rows whose largest probabilities are ~600x the output's rms (the reference, float32 as for a half
    precision configuration)."""
    g = torch.Generator().manual_seed(seed)
    x = 1.8 * torch.randn(rows, cols, generator=g, dtype=torch.float64)
    return torch.softmax(x, dim=1).float()


@pytest.fixture(scope="module")
def softmax_ref():
    return _heavy_tailed_softmax()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_correctly_rounded_heavy_tailed_output_passes(softmax_ref, dtype):
    ref = softmax_ref
    cand = ref.to(dtype)
    tol = tolerance_for(dtype)
    # the premise: the largest element is far above the rms, and the rounding alone fails the rule without ``elem``
    rms = ref.double().norm().item() / math.sqrt(ref.numel())
    assert ref.max().item() / rms > 500
    assert error_figures(cand, ref)[1] > tol["max"]
    mismatch, figures = compare_outputs(cand, ref, dtype)
    assert mismatch is None, mismatch.message
    assert figures["norm_err"] < tol["norm"] and figures["max_err"] <= tol["max"]


def test_an_error_past_the_rounding_on_a_large_element_is_caught(softmax_ref):
    ref = softmax_ref
    cand = ref.to(torch.bfloat16)
    at = int(torch.argmax(ref))
    cand.view(-1)[at] = (ref.view(-1)[at] * 1.03).to(torch.bfloat16)  # 3 %: twice bfloat16's ``elem``
    mismatch, figures = compare_outputs(cand, ref, torch.bfloat16)
    assert mismatch is not None and "max error / rms" in mismatch.message
    assert figures["norm_err"] < DEFAULT_TOLERANCES["bfloat16"]["norm"]  # one element: the norm alone passes it
    idx = list(divmod(at, ref.shape[1]))
    assert f"worst element at index {idx}" in mismatch.message


def test_an_error_of_a_third_of_the_rms_on_a_small_element_is_caught(softmax_ref):
    ref = softmax_ref
    cand = ref.to(torch.bfloat16)
    rms = ref.double().norm().item() / math.sqrt(ref.numel())
    at = int(torch.argmin((ref - rms).abs()))  # an element about the rms in size
    cand.view(-1)[at] = ref.view(-1)[at] + 0.3 * rms
    mismatch, _ = compare_outputs(cand, ref, torch.bfloat16)
    assert mismatch is not None and "max error / rms" in mismatch.message


def test_float32_keeps_its_tight_rules(softmax_ref):
    ref = softmax_ref.double()
    assert compare_outputs(ref.float(), ref, torch.float32)[0] is None
    cand = ref.float()
    at = int(torch.argmax(ref))
    cand.view(-1)[at] *= 1 + 1e-4  # far past float32's ``elem`` (2**-18) on the largest element
    mismatch, figures = compare_outputs(cand, ref, torch.float32)
    assert mismatch is not None and figures["norm_err"] < DEFAULT_TOLERANCES["float32"]["norm"]
    low = ref.to(torch.bfloat16)  # computing a float32 output in bfloat16: every element off by its rounding
    mismatch, _ = compare_outputs(low.float(), ref, torch.float32)
    assert mismatch is not None and "norm-wise relative error" in mismatch.message


def test_the_max_figure_counts_only_the_error_past_the_elements_own_rounding():
    ref = torch.tensor([1.0, 100.0], dtype=torch.float64)
    rms = math.sqrt((1.0 + 1e4) / 2)
    norm_err, max_err, idx = error_figures(torch.tensor([1.5, 100.5]), ref, elem=0.01)
    assert max_err == pytest.approx((0.5 - 0.01) / rms) and idx == (0,)  # 100.5 is within 0.01 * 100
    assert norm_err == pytest.approx(math.sqrt(0.5) / ref.norm().item())
    # no element past its allowance: the figure is 0 and the index points at the largest error (for the message)
    norm_err, max_err, idx = error_figures(torch.tensor([1.001, 100.5]), ref, elem=0.01)
    assert max_err == 0.0 and idx == (1,) and norm_err > 0
    assert error_figures(torch.tensor([1.5, 100.5]), ref)[1] == pytest.approx(0.5 / rms)  # elem 0: as before


def test_every_dtype_has_an_elem_far_below_its_norm_tolerance_and_overrides_keep_it():
    for key, tol in DEFAULT_TOLERANCES.items():
        assert 0 < tol["elem"] <= tol["norm"] / 1.2, key
    over = tolerance_for(torch.bfloat16, {"bfloat16": {"max": 1.0}})
    assert over == {"norm": 2e-2, "max": 1.0, "elem": 2.0 ** -6}
