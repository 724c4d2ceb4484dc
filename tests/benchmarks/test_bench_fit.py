"""benchmarks/bench_fit.py compares like with like: its PyTorch loop takes the same steps as fit."""
import os
import sys

import numpy as np
import pytest

import course_lib as cl

pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import bench_fit  # noqa: E402


def test_the_pytorch_loop_takes_the_same_steps_as_fit():
    """Same parameters, batches, schedule and clipping: the step losses agree to float32 rounding,
    which grows over the steps, and both models end on the same test accuracy."""
    data = cl.task.splits(0, n_train=1600)                     # 50 steps an epoch
    _, acc, losses = bench_fit.fit_course_lib(data, epochs=3, seed=3)
    _, torch_acc, torch_losses = bench_fit.fit_torch(data, epochs=3, seed=3)
    assert len(losses) == len(torch_losses) == 150
    np.testing.assert_allclose(torch_losses[:10], losses[:10], rtol=1e-5)     # seen: 1e-7
    np.testing.assert_allclose(torch_losses, losses, rtol=0.03)               # seen: 0.006 at step 129
    assert torch_acc == pytest.approx(acc, abs=0.02)
