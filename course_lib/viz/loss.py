"""Plots of notebook 08, softmax and cross-entropy: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
