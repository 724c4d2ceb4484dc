"""Plots of notebook 09, backprop I, the chain rule: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
