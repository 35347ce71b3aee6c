"""Held-out test set: written on 2026-12-02 before the tuning it is meant to check.

Same format and labelling conventions as ``bench/devset``; never used to choose weights,
rules or schema words — ``bench/extraction.py --set heldout`` only reports on it.
"""
