"""aipq: Hive-style SQL on Spark as a staged job DAG with adaptive information passing.

From Python: ``aipq.sql(query, spark=…, **options)`` runs a query or a workflow text, ``aipq.run_file(path, …)`` a
workflow file, ``aipq.explain(query, …)`` shows its plan, ``aipq.spark_conf()`` gives the settings a SparkSession
needs for aipq (``aipq/api/``)."""

_PUBLIC = ("sql", "run_file", "explain", "spark_conf", "Result")


def __getattr__(name: str):
    if name in _PUBLIC:
        from aipq import api

        return getattr(api, name)
    raise AttributeError(f"module 'aipq' has no attribute {name!r}")
