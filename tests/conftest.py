"""Shared pytest setup for npdynamo's tests (kept minimal; fixtures live next to their tests)."""
