"""The 22 TPC-H queries in their standard text (validation parameters), shipped as package data."""

from __future__ import annotations

from importlib import resources

QUERY_NUMBERS = tuple(range(1, 23))


def query_text(number: int) -> str:
    if number not in QUERY_NUMBERS:
        raise ValueError(f"TPC-H has queries 1 to 22, not {number}")
    return resources.files("aipq.tpch").joinpath(f"queries/q{number:02d}.sql").read_text()
