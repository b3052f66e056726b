"""Generate TPC-H data with tpchgen-cli (parquet) and register the 8 tables."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from aipq.errors import BadInputError, EnvironmentProblem

TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")


def tpchgen_executable() -> str:
    beside_python = Path(sys.executable).parent / "tpchgen-cli"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("tpchgen-cli")
    if found is None:
        raise EnvironmentProblem("tpchgen-cli was not found", hint="pip install tpchgen-cli (aipq depends on it)")
    return found


def scale_label(scale_factor: float) -> str:
    return f"sf{scale_factor:g}".replace(".", "_")


def data_dir(home: Path, scale_factor: float) -> Path:
    return Path(home) / "warehouse" / "tpch" / scale_label(scale_factor)


def generate(home: Path, scale_factor: float, parts: int = 1) -> Path:
    """Parquet files for every table under the home's warehouse; reused when complete."""
    if scale_factor <= 0:
        raise BadInputError(f"--sf must be positive, not {scale_factor}")
    target = data_dir(home, scale_factor)
    if all(table_path(target, t).exists() for t in TABLES):
        return target
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [tpchgen_executable(), "parquet", "-s", f"{scale_factor:g}", "-o", str(staging), "--no-progress"]
    if parts > 1:
        command += ["--parts", str(parts)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvironmentProblem(f"tpchgen-cli failed: {done.stderr.strip() or done.stdout.strip()}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def table_path(folder: Path, table: str) -> Path:
    """tpchgen-cli writes ``table.parquet`` (one part) or ``table/`` (several parts)."""
    single = folder / f"{table}.parquet"
    return single if single.exists() or not (folder / table).exists() else folder / table
