"""Plots of notebook 05, residuals and LayerNorm: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
