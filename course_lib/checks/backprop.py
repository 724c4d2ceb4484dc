"""Checkers for notebook 09, backprop I, the chain rule."""
__all__ = []
