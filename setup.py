"""Build script for npdynamo: the Python packages plus the C extension ``dynamo._C``.

Metadata (name, version, dependencies) lives in pyproject.toml; this file adds what
pyproject cannot express: the package selection, the C extension built from ``csrc/*.c``,
and a clear refusal on Python versions whose frame internals the hook does not know.

Used by ``pip install .``, ``pip install -e .`` and ``python setup.py build_ext --inplace``.
"""

import glob
import os
import sys

# Checked before importing setuptools so the message is the first thing anyone sees.
# The PEP 523 hook reads CPython's private frame layout, which changes in every minor
# version; stop before the compiler produces a confusing error (csrc/cpython_compat.h
# also has an #error for the same reason).
SUPPORTED = ((3, 10), (3, 11), (3, 12), (3, 13))
if sys.version_info[:2] not in SUPPORTED:
    sys.exit(
        "npdynamo supports CPython 3.10, 3.11, 3.12 and 3.13; you have %d.%d. "
        "Install it with one of those interpreters." % sys.version_info[:2]
    )

from setuptools import Extension, find_packages, setup  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", "*.c")))
HEADERS = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "csrc", "*.h")))

extension = Extension(
    "dynamo._C",
    sources=SOURCES,
    depends=HEADERS,
    include_dirs=["csrc"],
    extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers"],
)

setup(
    packages=find_packages(include=["dynamo", "dynamo.*", "fx", "fx.*"]),
    ext_modules=[extension],
    python_requires=">=3.10,<3.14",
)
