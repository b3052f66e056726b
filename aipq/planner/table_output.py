"""Shape a query's output for a table: the names a table can hold, and the target table's types.

CREATE TABLE … AS SELECT names columns as the query does (an unnamed expression becomes ``_cN``, as in
Hive); INSERT fills the target's columns by position (or by the listed columns), casting each value to the
column's type and leaving unlisted columns NULL. The final stage then writes exactly the table's columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sqlglot import exp

from aipq.errors import BadInputError
from aipq.planner.logical import Project, QueryPlan, col

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class TableShape:
    """What a table write needs: the target's columns (name, Spark type) for INSERT; None for CTAS. For
    INSERT INTO t (a, b), the listed columns in the order the query fills them."""

    target: str
    columns: tuple[tuple[str, str], ...] | None = None
    listed: tuple[str, ...] = ()
    # the partition columns whose values the rows carry (last, in this order): the final stage writes one
    # folder per value, as Hive's dynamic partitions
    partition_by: tuple[str, ...] = ()
    format: str = "parquet"  # the table's data source format


def table_column_names(names: tuple[str, ...], target: str, source_name: str | None) -> list[str]:
    result = []
    for i, name in enumerate(names):
        result.append(name.lower() if _PLAIN_NAME.match(name) else f"_c{i}")
    seen: set[str] = set()
    for name in result:
        if name in seen:
            raise BadInputError(f"the query for table {target} returns two columns named {name!r}",
                                source_name=source_name, hint="give one of them an alias (… AS other_name)")
        seen.add(name)
    return result


def shape_for_table(plan: QueryPlan, shape: TableShape, sql: str, source_name: str | None) -> QueryPlan:
    produced = plan.root.output
    if shape.columns is None:
        names = table_column_names(plan.output_names, shape.target, source_name)
        missing = [c for c in shape.partition_by if c not in names]
        if missing:
            raise BadInputError(f"the query for table {shape.target} has no column {missing[0]!r} to partition by",
                                source_name=source_name, hint=f"its columns: {', '.join(names)}")
        if len(shape.partition_by) == len(names):
            raise BadInputError(f"table {shape.target} would have only partition columns", source_name=source_name,
                                hint="a table needs at least one column that is not a partition column")
        order = [n for n in names if n not in shape.partition_by] + list(shape.partition_by)
        by_name = dict(zip(names, produced))
        items = tuple((name, col(by_name[name])) for name in order)
        return replace(plan, root=Project(plan.root, items), output_names=tuple(order))
    target_names = [name for name, _ in shape.columns]
    listed = list(shape.listed) or target_names
    unknown = [c for c in listed if c not in target_names]
    if unknown:
        raise BadInputError(f"table {shape.target} has no column {unknown[0]!r}", source_name=source_name,
                            hint=f"its columns are {', '.join(target_names)}")
    if len(listed) != len(produced):
        raise BadInputError(
            f"table {shape.target} expects {len(listed)} column(s) but the query returns {len(produced)}",
            source_name=source_name, hint="match the SELECT list to the table's columns, in order")
    by_target = dict(zip(listed, produced))
    items = []
    for name, spark_type in shape.columns:
        target_type = exp.DataType.build(spark_type, dialect="spark")
        value = col(by_target[name]) if name in by_target else exp.Null()
        items.append((name, exp.Cast(this=value, to=target_type)))
    return replace(plan, root=Project(plan.root, tuple(items)), output_names=tuple(target_names))
