"""Fixtures of the program corpus tests (tests/programs/): every test starts and ends with empty
npdynamo caches, so each program is compiled from scratch by the backend under test."""

from __future__ import annotations

import pytest

import dynamo


@pytest.fixture(autouse=True)
def _fresh_caches():
    dynamo.reset()
    yield
    dynamo.reset()
