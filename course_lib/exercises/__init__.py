"""The course's exercises, in one table that the checkers, `yours`, the grader and the student
edition read: for each, its number (its notebook is the number's first part), its title as the
notebook's heading writes it, the checker that grades it and the functions it provides that the
model runs. tests/core/test_exercises.py holds the table against the notebooks.

    cells.py    where an exercise sits in a notebook: its heading, code cells and check cell
    limits.py   the time, memory and disk limits on a process that runs a learner's cells
                (the grader's worker and `yours`)
"""
from __future__ import annotations

from dataclasses import dataclass

NOTEBOOKS = ("01_tokens_and_task", "02_embeddings_and_positions", "03_single_head_attention",
             "04_multi_head_attention", "05_residuals_and_layernorm", "06_feed_forward_and_block",
             "07_stacking_and_output_head", "08_softmax_and_cross_entropy", "09_backprop_chain_rule",
             "10_backprop_whole_model", "11_training", "12_small_gpt_on_text")


@dataclass(frozen=True)
class Part:
    """A function a learner writes that the model runs, and where it runs."""
    name: str        # the learner's function, as the exercise names it
    role: str


@dataclass(frozen=True)
class Exercise:
    number: str                   # "2.1"
    title: str                    # as the notebook's heading "### Exercise 2.1: title" writes it
    checker: str | None = None    # its checker in course_lib.checks; None for a derivation on paper
    parts: tuple[Part, ...] = ()

    @property
    def name(self) -> str:
        """"Exercise 2.1", as the notebooks, the reports and the grader name it."""
        return f"Exercise {self.number}"

    @property
    def notebook(self) -> str:
        """The notebook's file name without .ipynb: "02_embeddings_and_positions"."""
        return NOTEBOOKS[int(self.number.split(".")[0]) - 1]


def _code(number, title, checker, *parts):
    return Exercise(number, title, checker, tuple(Part(*p) for p in parts))


def _paper(number, title):
    return Exercise(number, title)


EXERCISES = (
    _code("1.1", "encode by hand", "check_encode"),
    _code("1.2", "the answer function", "check_answer"),
    _paper("1.3", "derive the central difference's error"),
    _code("1.4", "a central-difference derivative", "check_central_difference"),
    _code("1.5", "numerical gradients of arrays", "check_numerical_gradient"),
    _code("2.1", "embedding lookup", "check_embed", ("embed", "embedding lookup")),
    _paper("2.2", "derive the gradient of the lookup"),
    _code("2.3", "embedding backward", "check_embed_backward", ("embed_backward", "embedding backward")),
    _code("2.4", "the sinusoidal table", "check_sinusoidal", ("sinusoidal", "position table")),
    _code("3.1", "stable softmax", "check_stable_softmax", ("softmax", "the loss's probabilities")),
    _code("3.2", "single-head attention", "check_single_head_attention"),
    _paper("3.3", "derive the softmax Jacobian"),
    _code("3.4", "softmax backward", "check_softmax_backward"),
    _paper("3.5", "derive the backward of one head"),
    _code("3.6", "single-head attention backward", "check_single_head_attention_backward"),
    _code("4.1", "split and merge heads", "check_split_merge_heads",
          ("split_heads", "inside multi-head attention"), ("merge_heads", "inside multi-head attention")),
    _code("4.2", "the causal mask", "check_causal_mask",
          ("apply_causal_mask", "inside multi-head attention (causal model)")),
    _paper("4.3", "derive the gradient of a masked score"),
    _code("4.4", "multi-head attention", "check_multihead_attention",
          ("multihead_attention", "attention layer forward")),
    _paper("4.5", "derive the backward of multi-head attention"),
    _code("4.6", "multi-head attention backward", "check_multihead_attention_backward",
          ("multihead_attention_backward", "attention layer backward (without 10.2)")),
    _code("5.1", "LayerNorm forward", "check_layernorm_forward", ("layernorm_forward", "LayerNorm forward")),
    _paper("5.2", "derive the LayerNorm backward"),
    _code("5.3", "LayerNorm backward", "check_layernorm_backward", ("layernorm_backward", "LayerNorm backward")),
    _paper("6.1", "derive the backward of a linear layer"),
    _code("6.2", "linear backward", "check_linear_backward", ("linear_backward", "FFN and head backward")),
    _code("6.3", "ReLU backward", "check_relu_backward", ("relu_backward", "ReLU backward (course model)")),
    _paper("6.4", "derive the GELU derivative"),
    _code("6.5", "GELU forward and backward", "check_gelu",
          ("gelu_forward", "GELU forward (GPT-style model)"), ("gelu_backward", "GELU backward (GPT-style model)")),
    _code("6.6", "one block, forward", "check_block_forward", ("block_forward", "each block's forward")),
    _paper("7.1", "derive the gradient of a tied weight"),
    _code("7.2", "the tied embedding's gradient", "check_tied_embedding_grad"),
    _code("7.3", "count the parameters", "check_param_count"),
    _code("8.1", "cross-entropy forward", "check_cross_entropy_forward", ("cross_entropy", "the loss")),
    _paper("8.2", "derive the gradient of the cross-entropy"),
    _code("8.3", "cross-entropy backward", "check_cross_entropy_backward",
          ("cross_entropy_backward", "the loss's gradient")),
    _paper("9.1", "derive the gradients of the two-layer network"),
    _code("9.2", "the network in code", "check_two_layer_mlp"),
    _code("9.3", "a fork that accumulates", "check_fork_backward"),
    _code("9.4", "three operations as nodes", "check_graph_ops"),
    _code("9.5", "the engine", "check_reverse_mode"),
    _paper("10.1", "derive the backward of a post-LN block"),
    _code("10.2", "the backward of a block", "check_block_backward", ("block_backward", "each block's backward")),
    _code("10.3", "the whole model's backward", "check_model_backward", ("model_backward", "the whole backward")),
    _paper("11.1", "derive the divergence threshold"),
    _code("11.2", "SGD with momentum", "check_sgd_momentum_step"),
    _paper("11.3", "derive Adam's bias correction"),
    _code("11.4", "an Adam step with bias correction", "check_adam_step", ("adam_step", "the update (--train)")),
    _code("11.5", "clip by the global norm", "check_clip_by_global_norm",
          ("clip_by_global_norm", "clipping (--train)")),
    _code("11.6", "the training loop", "check_train_loop", ("train_loop", "the training loop (--train)")),
    _code("12.1", "characters, ids and next-character windows", "check_char_windows"),
    _paper("12.2", "derive the best constant model"),
    _code("12.3", "the unigram and bigram baselines", "check_baselines"),
    _paper("12.4", "a model without the mask"),
    _paper("12.5", "derive what the temperature does"),
    _code("12.6", "sample with temperature and top-k", "check_sample"),
    _paper("12.7", "memorised or generalised?"),
)
BY_NUMBER = {ex.number: ex for ex in EXERCISES}
BY_CHECKER = {ex.checker: ex for ex in EXERCISES if ex.checker}
