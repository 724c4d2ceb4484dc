"""Checkers for notebook 10, backprop II, the whole model."""
__all__ = []
