"""Checkers for notebook 08, softmax and cross-entropy."""
__all__ = []
