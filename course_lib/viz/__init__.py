"""Plots learners call: one line in a notebook, a figure (or a slider over figures) out.

- figures: the course style, `new_figure`, `heatmap`, `line_plot`, gradient-check maps;
- widgets: `slider_plot` / `widget_plot`, a live ipywidgets plot in Jupyter that also works
  in the built book without a kernel (its script is `slider.js`);
- architecture: the model drawn from its configuration, `block_diagram` and `model_diagram`
  (stations: what they draw, checked against the model's own names);
- tokens, embeddings, attention, multihead, layernorm, feedforward, stacking, loss,
  backprop, whole_model, training: the plots of notebooks 01 to 11, one module each.
"""
from .figures import (LINESTYLES, PALETTE, STYLE, CourseFigure, cosine_similarity,  # noqa: F401
                      figure_and_axes, figure_png, gradient_check, gradient_error_maps, heatmap,
                      line_plot, new_figure, style)
from .widgets import MAX_FRAMES, WidgetPlot, slider_plot, widget_plot  # noqa: F401
from .tokens import *  # noqa: F401,F403
from .embeddings import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .multihead import *  # noqa: F401,F403
from .layernorm import *  # noqa: F401,F403
from .feedforward import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .stacking import *  # noqa: F401,F403
from .backprop import *  # noqa: F401,F403
from .whole_model import *  # noqa: F401,F403
from .training import *  # noqa: F401,F403
from .text import *  # noqa: F401,F403
from .architecture import Diagram, DiagramError, block_diagram, model_diagram  # noqa: F401
