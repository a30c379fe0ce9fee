"""Helpers shared by several test files (on pytest's ``pythonpath``: ``from support.x import y``)."""
