"""course_lib keeps freed memory for the next step: repeated steps take no fresh pages from the system."""
import json
import os
import subprocess
import sys

import pytest

from course_lib.kernels._fast import memory
from support import time_limit

pytestmark = pytest.mark.skipif(not memory.is_glibc(), reason="glibc's malloc only")

# Steps of a model whose arrays (up to 512 KB) are above glibc's first mmap threshold (128 KB),
# in a new process: the page faults of the last three steps, per step.
STEPS = """
import json, resource
import numpy as np
import course_lib as cl
model = cl.Transformer(cl.presets.gpt2(vocab_size=512, seq_len=64, d_model=128, n_heads=4, n_layers=2, d_ff=512))
opt = cl.optim.Adam(model.params, lr=1e-4)
tokens = np.random.default_rng(0).integers(0, 512, (4, 65))
def step():
    model.loss(tokens[:, :-1], tokens[:, 1:])
    opt.step(model.backward())
step(); step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    step()
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3))
"""


def faults_per_step(**env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", STEPS], env=dict(full, **env), capture_output=True, text=True,
                         timeout=time_limit(300))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_repeated_steps_reuse_freed_memory():
    """With glibc's own limits (set through its environment variables, which course_lib then leaves
    alone) every step faults its large arrays in again; with course_lib's, it takes almost none."""
    pytest.importorskip("resource", reason="page faults are counted with getrusage (POSIX; glibc's malloc is Linux's)")
    kept = faults_per_step()
    returned = faults_per_step(MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
    assert returned > 1000                      # seen: 4,374
    assert kept < returned / 10                 # seen: 0-41 (Python's own memory pools)


def test_limits_set_in_the_environment_are_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert memory.keep_freed_memory() == ["MALLOC_MMAP_THRESHOLD_"]
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert memory.keep_freed_memory() == []


def test_the_setting_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("COURSE_LIB_KEEP_FREED_MEMORY", "0")
    assert memory.keep_freed_memory() == []
