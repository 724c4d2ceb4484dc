"""Plots of notebook 07, stacking blocks and the output head: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
