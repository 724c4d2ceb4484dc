"""Plots of notebook 11, training: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
