"""Checkers for notebook 06, feed-forward and the block."""
__all__ = []
