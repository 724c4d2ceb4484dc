"""Checkers for notebook 05, residuals and LayerNorm."""
__all__ = []
