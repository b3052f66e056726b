"""Generate TPC-DS data with tpcgen-cli (parquet; the optional extra ``aipq[tpcds]``)."""

from __future__ import annotations

from pathlib import Path

from aipq.errors import BadInputError
from aipq.tpch.generate import find_executable, generate_into, scale_label

# The 24 tables of TPC-DS (tpcgen-cli also writes dbgen_version, the generator's own bookkeeping).
TABLES = ("call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
          "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
          "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
          "web_page", "web_returns", "web_sales", "web_site")


def tpcgen_executable() -> str:
    return find_executable("tpcgen-cli", hint="pip install 'aipq[tpcds]' (or pip install tpcgen-cli)")


def data_dir(home: Path, scale_factor: float) -> Path:
    return Path(home) / "warehouse" / "tpcds" / scale_label(scale_factor)


def generate(home: Path, scale_factor: float) -> Path:
    """One parquet file per table under the home's warehouse; reused when complete."""
    if scale_factor <= 0:
        raise BadInputError(f"--sf must be positive, not {scale_factor}")
    return generate_into(
        data_dir(home, scale_factor),
        lambda folder: [tpcgen_executable(), "tpcds", "parquet", "-s", f"{scale_factor:g}", "-o", str(folder)],
        lambda folder: all(table_path(folder, t).exists() for t in TABLES), "tpcgen-cli")


def table_path(folder: Path, table: str) -> Path:
    return folder / f"{table}.parquet"
