"""benchmarks/profile_step.py counts each kernel once per call and accounts for the whole step."""
import os
import sys

import numpy as np
import pytest

pytest.importorskip("resource", reason="profile_step.py counts page faults with getrusage (POSIX)")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import profile_step  # noqa: E402
from bench_sizes import make_config  # noqa: E402


def test_course_lib_profile_follows_the_model():
    """Per step of the course model: 4 products per block and the head's, attention over every position
    in the first block and at the scored rows in the last, two LayerNorms per block; every part, and what
    is left of the step around them, takes time; Adam is also timed alone (the course model has no GELU),
    and the step with the kernels' work taken out."""
    wall, rows, calls, faults, system, alone = profile_step.profile_course_lib("tiny", steps=3)
    L = make_config("tiny").n_layers
    assert calls["linear_forward"] == calls["linear_backward"] == 4 * L + 1
    assert calls["attention_forward"] == calls["attention_backward"] == L - 1
    assert calls["attention_rows_forward"] == calls["attention_rows_backward"] == 1
    assert calls["layernorm_forward"] == calls["layernorm_backward"] == 2 * L
    assert all(seconds > 0 for seconds in rows.values())
    assert faults >= 0 and system >= 0
    assert alone["Adam"] > 0 and alone["Python + Adam, kernels' work taken out"] > 0
    assert not any(name.startswith("GELU") for name in alone)


@pytest.mark.parametrize("n", [1, 3])
def test_each_kernel_says_how_many_threads_it_ran_on(n, monkeypatch):
    """With every split worth a thread (the thresholds lowered), each kernel uses what it is allowed."""
    from course_lib import optim
    from course_lib.kernels import layernorm, linear, residual
    from course_lib.kernels._fast import reduce, threads
    for module in (layernorm, linear, residual, reduce, optim):
        monkeypatch.setattr(module, "GRAIN", 1)
    with threads.set_num_threads(n):
        used = profile_step.profile_course_lib("tiny", steps=1)[2]["threads"]
    for name in ("layernorm_forward", "layernorm_backward", "residual_forward", "linear_backward",
                 "Adam (optimiser step)"):
        assert used[name] == n, name
    assert max(used.values()) == n and threads.observer is None


def test_gelu_is_timed_alone_with_its_arrays_in_the_caches_and_from_memory():
    import course_lib as cl
    model = cl.Transformer(cl.presets.gpt2(vocab_size=16, seq_len=8, d_model=32, n_heads=2, n_layers=1, d_ff=64))
    opt = cl.optim.Adam(model.params)
    tokens = np.arange(16).reshape(2, 8) % 16
    model.loss(tokens, tokens)
    alone = profile_step.alone(model, opt, model.backward(), repeats=2)
    assert set(alone) == {"Adam", "GELU forward per element", "GELU backward per element",
                          "GELU forward per element, from memory", "GELU backward per element, from memory"}
    assert all(seconds > 0 for seconds in alone.values())


def test_replayed_kernels_return_what_was_recorded_without_running_again():
    import types
    ran = []
    module = types.ModuleType("kernels")
    module.layer_forward = lambda x: ran.append(x) or np.full(2, x)
    module.layer_backward = lambda dy: ran.append(dy) or (dy, dy)
    module.table = lambda n: np.arange(n)
    replay = profile_step.ReplayedKernels(module)
    recorded = [replay.layer_forward(1.0), replay.layer_backward(2.0)]
    replay.play()
    for _ in range(2):      # the recording is served again for each step
        assert replay.layer_forward(5.0) is recorded[0] and replay.layer_backward(6.0) is recorded[1]
    assert ran == [1.0, 2.0] and replay.served == 4
    assert replay.table is module.table     # only the kernel pairs are replayed
    with pytest.raises(RuntimeError, match="called layer_backward where the recorded one called layer_forward"):
        replay.layer_backward(0.0)


def test_the_step_without_the_kernels_work_is_timed_and_the_kernels_put_back():
    import course_lib as cl
    model = profile_step.swappable(cl.presets.gpt2(vocab_size=16, seq_len=8, d_model=32, n_heads=2, n_layers=2,
                                                    d_ff=64))
    model.swapped = cl.kernels
    tokens = np.arange(16).reshape(2, 8) % 16
    loss = model.loss(tokens, tokens)
    seconds = profile_step.without_kernels(model, cl.optim.Adam(model.params), tokens, tokens, repeats=3)
    assert seconds > 0 and model.swapped is cl.kernels
    assert model.loss(tokens, tokens) != loss       # Adam stepped with the recorded gradients


def test_torch_profile_names_the_products():
    pytest.importorskip("torch")
    wall, rows, calls, _, _ = profile_step.profile_torch("tiny", steps=2)
    assert wall > 0 and calls["aten::mm"] >= 4 * make_config("tiny").n_layers
    assert rows["aten::mm"] > 0
