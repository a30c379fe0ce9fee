"""npdynamo: a TorchDynamo-style JIT compiler for NumPy code (public API is filled in elsewhere)."""
