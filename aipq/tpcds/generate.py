"""Generate TPC-DS data with tpcgen-cli (parquet; the optional extra ``aipq[tpcds]``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from aipq.errors import BadInputError, EnvironmentProblem
from aipq.tpch.generate import scale_label

# The 24 tables of TPC-DS (tpcgen-cli also writes dbgen_version, the generator's own bookkeeping).
TABLES = ("call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
          "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
          "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
          "web_page", "web_returns", "web_sales", "web_site")


def tpcgen_executable() -> str:
    beside_python = Path(sys.executable).parent / "tpcgen-cli"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("tpcgen-cli")
    if found is None:
        raise EnvironmentProblem("tpcgen-cli, which generates TPC-DS, was not found",
                                 hint="pip install 'aipq[tpcds]' (or pip install tpcgen-cli)")
    return found


def data_dir(home: Path, scale_factor: float) -> Path:
    return Path(home) / "warehouse" / "tpcds" / scale_label(scale_factor)


def generate(home: Path, scale_factor: float) -> Path:
    """One parquet file per table under the home's warehouse; reused when complete."""
    if scale_factor <= 0:
        raise BadInputError(f"--sf must be positive, not {scale_factor}")
    target = data_dir(home, scale_factor)
    if all(table_path(target, t).exists() for t in TABLES):
        return target
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [tpcgen_executable(), "tpcds", "parquet", "-s", f"{scale_factor:g}", "-o", str(staging)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvironmentProblem(f"tpcgen-cli failed: {done.stderr.strip() or done.stdout.strip()}")
    missing = [t for t in TABLES if not table_path(staging, t).exists()]
    if missing:
        raise EnvironmentProblem(f"tpcgen-cli wrote no {missing[0]} table", hint="pip install -U tpcgen-cli")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def table_path(folder: Path, table: str) -> Path:
    return folder / f"{table}.parquet"
