"""Plots of notebook 06, feed-forward and the block: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
