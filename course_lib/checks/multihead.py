"""Checkers for notebook 04, multi-head attention and masks."""
__all__ = []
