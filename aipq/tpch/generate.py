"""Generate TPC-H data with tpchgen-cli (parquet) and register the 8 tables."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from aipq.errors import BadInputError, EnvironmentProblem

TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")

_MONEY = "decimal(15,2)"
# The columns and Spark SQL types of tpchgen-cli's parquet output, so that registering the tables needs no Spark
# (the tests read the same files with DuckDB and would show a version that writes other types).
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "customer": (("c_custkey", "bigint"), ("c_name", "string"), ("c_address", "string"), ("c_nationkey", "bigint"),
                 ("c_phone", "string"), ("c_acctbal", _MONEY), ("c_mktsegment", "string"), ("c_comment", "string")),
    "lineitem": (("l_orderkey", "bigint"), ("l_partkey", "bigint"), ("l_suppkey", "bigint"),
                 ("l_linenumber", "int"), ("l_quantity", _MONEY), ("l_extendedprice", _MONEY),
                 ("l_discount", _MONEY), ("l_tax", _MONEY), ("l_returnflag", "string"), ("l_linestatus", "string"),
                 ("l_shipdate", "date"), ("l_commitdate", "date"), ("l_receiptdate", "date"),
                 ("l_shipinstruct", "string"), ("l_shipmode", "string"), ("l_comment", "string")),
    "nation": (("n_nationkey", "bigint"), ("n_name", "string"), ("n_regionkey", "bigint"), ("n_comment", "string")),
    "orders": (("o_orderkey", "bigint"), ("o_custkey", "bigint"), ("o_orderstatus", "string"),
               ("o_totalprice", _MONEY), ("o_orderdate", "date"), ("o_orderpriority", "string"),
               ("o_clerk", "string"), ("o_shippriority", "int"), ("o_comment", "string")),
    "part": (("p_partkey", "bigint"), ("p_name", "string"), ("p_mfgr", "string"), ("p_brand", "string"),
             ("p_type", "string"), ("p_size", "int"), ("p_container", "string"), ("p_retailprice", _MONEY),
             ("p_comment", "string")),
    "partsupp": (("ps_partkey", "bigint"), ("ps_suppkey", "bigint"), ("ps_availqty", "int"),
                 ("ps_supplycost", _MONEY), ("ps_comment", "string")),
    "region": (("r_regionkey", "bigint"), ("r_name", "string"), ("r_comment", "string")),
    "supplier": (("s_suppkey", "bigint"), ("s_name", "string"), ("s_address", "string"), ("s_nationkey", "bigint"),
                 ("s_phone", "string"), ("s_acctbal", _MONEY), ("s_comment", "string")),
}


def find_executable(name: str, hint: str) -> str:
    """A generator installed beside this Python (the venv's bin) or on PATH."""
    beside_python = Path(sys.executable).parent / name
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which(name)
    if found is None:
        raise EnvironmentProblem(f"{name} was not found", hint=hint)
    return found


def generate_into(target: Path, command: Callable[[Path], list[str]], complete: Callable[[Path], bool],
                  tool: str) -> Path:
    """``target`` filled by running ``command(folder)`` into a folder beside it, renamed into place only once
    ``complete`` says every table is there; kept as it is when it is complete already."""
    if complete(target):
        return target
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    done = subprocess.run(command(staging), capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvironmentProblem(f"{tool} failed: {done.stderr.strip() or done.stdout.strip()}")
    if not complete(staging):
        raise EnvironmentProblem(f"{tool} did not write every table", hint=f"pip install -U {tool}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def tpchgen_executable() -> str:
    return find_executable("tpchgen-cli", hint="pip install tpchgen-cli (aipq depends on it)")


def scale_label(scale_factor: float) -> str:
    return f"sf{scale_factor:g}".replace(".", "_")


def data_dir(home: Path, scale_factor: float) -> Path:
    return Path(home) / "warehouse" / "tpch" / scale_label(scale_factor)


def generate(home: Path, scale_factor: float, parts: int = 1) -> Path:
    """Parquet files for every table under the home's warehouse; reused when complete."""
    if scale_factor <= 0:
        raise BadInputError(f"--sf must be positive, not {scale_factor}")

    def command(folder: Path) -> list[str]:
        arguments = [tpchgen_executable(), "parquet", "-s", f"{scale_factor:g}", "-o", str(folder), "--no-progress"]
        return arguments + (["--parts", str(parts)] if parts > 1 else [])

    return generate_into(data_dir(home, scale_factor), command,
                         lambda folder: all(table_path(folder, t).exists() for t in TABLES), "tpchgen-cli")


def table_path(folder: Path, table: str) -> Path:
    """tpchgen-cli writes ``table.parquet`` (one part) or ``table/`` (several parts)."""
    single = folder / f"{table}.parquet"
    return single if single.exists() or not (folder / table).exists() else folder / table
