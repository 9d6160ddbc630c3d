"""Reads the modelled meters' ground truth (the exact modelled power per sample): the reader
lives with the analysis, which checks each trial against it (`analysis.truth`)."""

from __future__ import annotations

from analysis.truth import TRUTH_HEADER, Truth

__all__ = ["TRUTH_HEADER", "Truth"]
