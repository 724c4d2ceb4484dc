"""Plots of notebook 04, multi-head attention and masks: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
__all__ = []
