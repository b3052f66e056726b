#!/usr/bin/env bash
# Builds aipq/engine/jars/aipq-spark.jar from java/src against the installed PySpark's jars (Java 17 bytecode).
# The jar records the SHA-256 of its sources (tests/test_jvm.py fails when the sources change without a rebuild)
# and the Spark version it was built against (a session on another Spark minor version is refused at start).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python}"
spark_jars="$("$python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')"
spark_version="$("$python" -c 'import pyspark; print(pyspark.__version__)')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes/META-INF"
javac --release 17 -Xlint:all,-path -Werror -cp "$spark_jars/*" -d "$work/classes" $(find "$here/src" -name '*.java' | sort)
(cd "$here/src" && cat $(find . -name '*.java' | LC_ALL=C sort)) | sha256sum | cut -d' ' -f1 \
    > "$work/classes/META-INF/aipq-source.sha256"
echo "$spark_version" > "$work/classes/META-INF/aipq-spark-version"
jar --create --file "$work/aipq-spark.jar" --date=2026-01-01T00:00:00Z -C "$work/classes" .
mv "$work/aipq-spark.jar" "$here/../aipq/engine/jars/aipq-spark.jar"
echo "built aipq/engine/jars/aipq-spark.jar"
