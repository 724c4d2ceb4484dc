"""Checkers (being written)."""
__all__ = []
