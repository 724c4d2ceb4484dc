"""Checkers for notebook 07, stacking blocks and the output head."""
__all__ = []
