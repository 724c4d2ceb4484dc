"""The speed machinery's tuning constants, in one table, each with what set it. The modules that
use one import it under the name they use (each kernel module's GRAIN is its row here); the tests
lower the grains to make every kernel split (tests/kernels/test_thread_count.py). Measurements are
on this project's 2-core cloud machines unless said; benchmarks/README.md has the tables.

A grain is how much work makes a thread worth its hand-over (split_work gives a thread no less):
OpenMP's spinning threads start a parallel loop in about 4 us, the workqueue's sleeping ones in
90-150 us (2026-11-28/29). The grains were set when the kernels went parallel (2026-11-28), larger
where an element's work is cheaper (benchmarks/README.md, Threads); of them only Adam's was
measured on its own (below).
"""

# -- grains: elements (or parameters, logits, multiply-adds) a thread, at least ---------------
GELU_GRAIN = 1 << 15          # activations.py: a tanh and a few products an element
CROSS_ENTROPY_GRAIN = 1 << 15  # cross_entropy.py: logits; an exp an element
LAYERNORM_GRAIN = 1 << 16     # layernorm.py: two passes over a row
LINEAR_GRAIN = 1 << 16        # linear.py: the bias added by rows, summed by columns
RESIDUAL_GRAIN = 1 << 17      # residual.py: one addition an element
COPY_GRAIN = 1 << 17          # copy.py: a copy or a scale an element is cheap
REDUCE_GRAIN = 1 << 16        # reduce.py: column sums
ADAM_GRAIN = 1 << 15          # optim.py: parameters; 2^19 -> 2^15 split mid's 262k-parameter
#                               matrices: Adam alone 2.0 -> 1.3 ms, mid's step 0.92x (2026-11-29)
ADAM_SMALL_MODEL = 32         # optim.py: below 32 grains of parameters in all (the course model's), a
#                               step is one call on one thread, as before the threads (2026-11-29)
PAIR_GRAIN = 1 << 20          # linear.py: multiply-adds of each of a small layer's two backward
#                               products from which they run on two threads: the course model's step
#                               0.92-0.93x the time at 2 threads, 1.00-1.01x at 1 (2026-11-29)

# -- products: kernels/_fast/products.py ---------------------------------------------------
SMALL_PRODUCT = 1 << 22       # multiply-adds up to which a product is one BLAS call (the course
#                               model's all are), whatever the thread count (2026-11-28)
TILE_WORK = 1 << 22           # multiply-adds a tile, at least: a call's own cost small beside it
MIN_SIDE = 128                # rows and columns a tile, at least: BLAS packs a tile's operands again;
#                               mid's products 21.3 ms at 16 a side, 19.7 ms at 128 (2026-11-29)

# -- attention: kernels/attention.py ------------------------------------------------------
BLAS_MIN_T = 32               # positions from which attention's products go to BLAS; below, plain
#                               loops are fastest (2026-11-22)
BLOCK = 32                    # query rows a block in the BLAS path; causal blocks skip masked keys
#                               (2026-11-24)

# -- threads and BLAS: kernels/_fast/threads.py, spin.py, reduce.py ---------------------------
SMALL_MODEL_PRODUCTS = 1 << 22   # rows x d_model x d_model below which training uses one BLAS
#                                  thread (threads_for_model): spinning threads steal the kernels'
#                                  core at the course model's size (2026-11-22)
SPIN_EXPONENT = 20            # OpenBLAS's idle threads spin 2^20 cycles, not 2^28: right after a
#                               product attention and GELU ran about twice as slow (2026-11-24)
SQUARES_CHUNK = 1 << 18       # a sum of squares in chunks of this many values, added in order;
#                               the chunks are the bytes: changing it changes the clipping's sums
