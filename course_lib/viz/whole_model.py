"""Plots of notebook 10, backprop II, the whole model: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
