"""Checkers for notebook 11, training."""
__all__ = []
