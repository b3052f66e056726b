"""The catalog as a workflow sees it at one point (``WorkflowCatalog``): tables and views earlier statements
created or dropped and its temporary views, so that the whole file can be planned, and its mistakes found,
before anything runs; and a statement's unqualified names put in the current database (``in_database``)."""

from __future__ import annotations

from sqlglot import exp, parse_one

from aipq.catalog import DEFAULT_DATABASE, Catalog, TableEntry, split_name
from aipq.errors import BadInputError
from aipq.planner.parse import node_position
from aipq.planner.resolve import qualified_key, referenced_tables
from aipq.workflow.statements import ViewStep


def in_database(statement: exp.Expression, database: str, views: set[str]) -> exp.Expression:
    """The statement with every unqualified table name (not a CTE, not one of the workflow's temporary
    ``views``) put in ``database``, as ``USE database`` asks."""
    kind = str(statement.args.get("kind") or "").upper() if isinstance(statement, (exp.Create, exp.Drop)) else ""
    if database == DEFAULT_DATABASE:
        return statement
    statement = statement.copy()
    ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    properties = statement.args.get("properties") if kind == "VIEW" else None
    temporary = properties is not None and any(isinstance(p, exp.TemporaryProperty) for p in properties.expressions)
    view_name = statement.find(exp.Table) if kind == "VIEW" and temporary else None
    for table in statement.find_all(exp.Table):
        if table.name and not table.db and table is not view_name and table.name.lower() not in ctes | views:
            table.set("db", exp.to_identifier(database))
    return statement



class WorkflowCatalog:
    """The catalog as the workflow sees it at one point: the base catalog plus the tables and views earlier
    statements created (or dropped) and the temporary views they defined."""

    def __init__(self, base: Catalog):
        self.base = base
        self.changes: dict[str, TableEntry | None] = {}  # database.name → entry (None: dropped)
        self.views: dict[str, exp.Expression] = {}  # name → the view's query, views inside it expanded
        self.kept_views: dict[str, str | None] = {}  # database.name → a catalog view's query text (None: dropped)

    def lookup(self, name: str) -> TableEntry | None:
        key = ".".join(split_name(name))
        if key in self.changes:
            return self.changes[key]
        return self.base.lookup(key)

    def view_query(self, name: str) -> str | None:
        """The query text of a view kept in the catalog (as this workflow left it), None if there is none."""
        key = ".".join(split_name(name))
        return self.kept_views[key] if key in self.kept_views else self.base.view_query(key)

    def known_names(self) -> list[str]:
        names = set(self.base.known_names()) | set(self.views) | set(self.base.view_names())
        for key, entry in [*self.changes.items(), *self.kept_views.items()]:
            short = key.removeprefix("default.")
            if entry is None:
                names.discard(short)
            else:
                names.add(short)
        return sorted(names)

    def expand_views(self, statement: exp.Expression, depth: int = 0) -> exp.Expression:
        """The statement with every reference to a view replaced by the view's query: a temporary view's, or
        one kept in the catalog (whose own views are expanded in turn)."""
        statement = statement.copy()
        for table in referenced_tables(statement):
            view = None
            if not table.db and table.name.lower() in self.views:
                view = self.views[table.name.lower()].copy()
            else:
                text = self.view_query(qualified_key(table))
                if text is not None:
                    if depth > 32:
                        raise BadInputError(f"view {qualified_key(table)} reads itself, through other views",
                                            hint="drop and recreate one of the views")
                    view = self.expand_views(parse_one(text, read="hive"), depth + 1)
            if view is not None:
                alias = table.alias or table.name
                table.replace(exp.Subquery(this=view, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        return statement

    def define_view(self, step: ViewStep, sql: str, source_name: str | None) -> None:
        if step.name in self.views and not step.replace:
            raise BadInputError(f"view {step.name!r} already exists", position=node_position(step.statement.this,
                                                                                               sql),
                                source_name=source_name, hint="use CREATE OR REPLACE TEMPORARY VIEW")
        self.views[step.name] = self.expand_views(view_query(step))



def view_query(step: ViewStep) -> exp.Expression:
    """The view's query, its columns renamed as the view's column list says."""
    if not step.columns:
        return step.query
    return exp.select(*[exp.column(f"_c{i}").as_(c) for i, c in enumerate(step.columns)]).from_(
        exp.Subquery(this=step.query, alias=exp.TableAlias(
            this=exp.to_identifier("_view"), columns=[exp.to_identifier(f"_c{i}") for i in range(len(step.columns))])))

