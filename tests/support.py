"""Helpers shared by the tests (fixtures live in conftest.py)."""
import course_lib as cl


def small_config(**overrides):
    """A small model for gradient checks: every code path, few parameters."""
    base = dict(d_model=16, n_heads=2, d_ff=32, n_layers=2)
    base.update(overrides)
    return cl.presets.deep_dive(**base)
