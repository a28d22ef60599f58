"""argparse value types shared by the command line (:mod:`jacacc.cli`) and the experiment scripts.

Each raises :class:`argparse.ArgumentTypeError`, which argparse prints as one
line naming the option and the bad value.

Examples
--------
>>> positive_int("3"), positive_seconds("0.5"), dimension("0")
(3, 0.5, 0)
"""

from __future__ import annotations

import argparse

__all__ = ["dimension", "positive_int", "positive_seconds"]


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1 (workers, batch sizes, repeats, statement limits)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def dimension(text: str) -> int:
    """argparse type: an array dimension, an integer ≥ 0 (``--shape``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a dimension must be >= 0, got {value}")
    return value
