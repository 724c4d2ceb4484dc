"""Freed memory kept for the next training step (glibc's malloc, on Linux).

A step allocates and frees the same arrays every time. By default glibc gives large
blocks back to the system as soon as they are freed: each block above its mmap threshold
(128 KB at first) is mapped and unmapped on its own, and the heap's free top is trimmed.
The next step then takes every page of them from the kernel again, one page fault per
4 KB, each page zero-filled: from the mid size on, a large share of a step's time
(benchmarks/profile_step.py counts the faults; benchmarks/README.md has the figures).

keep_freed_memory() raises both limits: blocks up to 32 MB (the largest threshold glibc
accepts) come from the heap, and up to 1 GB of free heap stays mapped. The next step
reuses that memory; larger blocks still go back to the system at once. It is called when
course_lib.kernels is imported. A limit set through glibc's own environment variables
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) is left as it is; with
COURSE_LIB_KEEP_FREED_MEMORY=0, or another C library (macOS, Windows, musl), nothing changes.
"""
import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3         # mallopt's option numbers, from glibc's malloc.h
LIMITS = {"MALLOC_MMAP_THRESHOLD_": (M_MMAP_THRESHOLD, 32 << 20),
          "MALLOC_TRIM_THRESHOLD_": (M_TRIM_THRESHOLD, 1 << 30)}


def is_glibc():
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):     # no confstr, or no such name here
        return False


def keep_freed_memory():
    """Raise glibc's mmap and trim thresholds unless the environment says otherwise. -> the names set."""
    if not is_glibc() or os.environ.get("COURSE_LIB_KEEP_FREED_MEMORY") == "0":
        return []
    libc = ctypes.CDLL(None)                        # the C library this process runs on
    changed = []
    for name, (option, value) in LIMITS.items():
        if name not in os.environ and libc.mallopt(option, value) == 1:
            changed.append(name)
    return changed
