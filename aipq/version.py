"""Which aipq this is, down to its source: what a stage computed with one aipq is not served to another."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path


@functools.cache
def code_version() -> str:
    """A digest of aipq's own code as installed (an editable install keeps its version number as it changes)."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for source in sorted(package.rglob("*.py")):
        digest.update(source.relative_to(package).as_posix().encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]
