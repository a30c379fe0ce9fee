"""`fx.op_rules.numpy_signatures`: the signatures of NumPy C functions recorded from NumPy 2.5,
for NumPy 2.2 (CPython 3.10), which reports none for them and whose rules bind arguments by
signature.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

from fx.op_rules._core import _recorded_signature, signature
from fx.op_rules.numpy_signatures import TEXT_SIGNATURES


def _function(key: str):
    module, name = key.rsplit(".", 1)
    if module == "ufunc":
        return getattr(np.add, name)
    return getattr(importlib.import_module(module), name, None)


@pytest.mark.parametrize("key", sorted(TEXT_SIGNATURES))
def test_each_recorded_signature_parses_and_names_a_numpy_function(key):
    fn = _function(key)
    if fn is None:
        pytest.skip(f"{key} is newer than this NumPy")
    assert isinstance(_recorded_signature(fn), inspect.Signature)


def test_recorded_signatures_match_numpy_where_it_reports_them():
    checked = 0
    for key, text in TEXT_SIGNATURES.items():
        fn = _function(key)
        if fn is None:
            continue
        try:
            own = inspect.signature(fn)
        except ValueError:
            continue  # (NumPy 2.2: the table is what binds)
        # parameter names and kinds agree (defaults may print differently between versions)
        recorded = _recorded_signature(fn)
        assert [(p.name, p.kind) for p in own.parameters.values()] == \
            [(p.name, p.kind) for p in recorded.parameters.values()], key
        checked += 1
    if np.lib.NumpyVersion(np.__version__) >= "2.5.0":
        assert checked == len(TEXT_SIGNATURES)


def test_zeros_binds_by_keyword_on_every_numpy():
    bound = signature(np.zeros).bind((2, 3), dtype=np.int32)
    assert bound.arguments == {"shape": (2, 3), "dtype": np.int32}
