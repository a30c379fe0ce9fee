"""A fixture for tests that read npdynamo's own diagnostics as Python warnings.

By default npdynamo reports them through logging only (`dynamo.diagnostics`); a test that uses
``pytest.warns`` or records warnings, here or in a subprocess it starts, asks for warnings with
``dynamo.config.emit_warnings`` and its environment variable. Use it with
``pytestmark = pytest.mark.usefixtures("diagnostics_as_warnings")`` after importing it.
"""

from __future__ import annotations

import pytest

from dynamo import config


@pytest.fixture
def diagnostics_as_warnings(monkeypatch):
    monkeypatch.setenv("DYNAMO_EMIT_WARNINGS", "1")  # (subprocesses)
    with config.patch(emit_warnings=True):
        yield
