"""Fixtures of the differential fuzzer (tests/fuzz/test_differential.py).

In: pytest's temporary directories. Out: `program_dir`, the real directory the generated
programs are written to (npdynamo skips code whose file name starts with '<' as generated
code, and the file:line in its graphs and messages comes from linecache reading the file).
Every test here starts and ends with empty npdynamo caches.
"""

from __future__ import annotations

import pytest

import dynamo


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("fuzz_programs")


@pytest.fixture(autouse=True)
def _fresh_caches():
    dynamo.reset()
    yield
    dynamo.reset()
