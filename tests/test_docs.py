"""The documentation stays a house a newcomer finds their way in: README a front door (at most 200 lines, the two
commands first), every page under docs/ at most 400 lines, docs/bench at most 10 folders each linked from
benchmarks.md, every decision listed in the index, and every relative link in README and docs/ pointing at a file
that exists (and at a heading of it, for an #anchor). Pure file reading: no Spark, milliseconds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted([README, *DOCS.rglob("*.md")])
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`]*`")
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: its rendered text lower-cased, punctuation dropped, spaces as hyphens."""
    text = LINK.sub(lambda m: m.group(1), heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text())):
        base = anchor(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    return [target for _, target in LINK.findall(prose(page.read_text()))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_readme_is_a_front_door_with_both_commands_first():
    text = README.read_text()
    assert len(text.splitlines()) <= 200, "README.md is the front door: move detail into docs/guide or docs/concepts"
    first_section = text.split("\n## ", 1)[0]
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        assert re.search(re.escape(marker) + r"\n```bash\npython3 -m venv \.venv && [^\n]+\n```", first_section), \
            f"README's {marker} and its command must come before the first section"


@pytest.mark.parametrize("page", [p for p in PAGES if p.is_relative_to(DOCS)], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_docs_page_is_at_most_400_lines(page: Path):
    assert len(page.read_text().splitlines()) <= 400, f"{page.relative_to(ROOT)}: split it by topic"


def test_docs_bench_holds_at_most_ten_folders_each_linked_from_benchmarks():
    folders = sorted(p.name for p in (DOCS / "bench").iterdir() if p.is_dir())
    assert len(folders) <= 10, f"docs/bench has {len(folders)} folders: drop superseded runs (git keeps them)"
    linked = {Path(t.split("#")[0]).parts[1] for t in relative_links(DOCS / "benchmarks.md") if t.startswith("bench/")}
    assert set(folders) <= linked, f"not linked from docs/benchmarks.md: {sorted(set(folders) - linked)}"


def test_every_decision_is_listed_in_the_index():
    index = (DOCS / "decisions.md").read_text()
    own = [m.group(2) for m in HEADING.finditer(index) if m.group(1) == "##" and not m.group(2).startswith("[")]
    assert not own, f"docs/decisions.md is the index: move these to the end of their docs/decisions/ file: {own}"
    for area in sorted((DOCS / "decisions").glob("*.md")):
        for match in HEADING.finditer(FENCE.sub("", area.read_text())):
            if match.group(1) == "##":
                assert f"decisions/{area.name}#{anchor(match.group(2))})" in index, \
                    f"docs/decisions.md does not list {area.name}'s entry {match.group(2)!r}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors_of(resolved):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def code_path_exists(reference: str) -> bool:
    """Whether a reference such as ``engine/stage_job.StageRunner.run_recovering``, ``ip/scan_summaries.py`` or
    ``tests/test_cluster.py`` names a module (or package) that exists and, after the dot, names it defines."""
    path, _, names = reference.removesuffix(".py").partition(".")
    base = ROOT / path if path.startswith(("aipq/", "tests/", "java/")) else ROOT / "aipq" / path
    files = [base.with_suffix(".py")] if base.with_suffix(".py").exists() else sorted(base.rglob("*.py"))
    if not files:
        return False
    text = "\n".join(f.read_text() for f in files)
    return all(re.search(rf"\b{re.escape(name)}\b", text) for name in names.split(".") if name)


def test_every_module_a_decision_title_names_exists():
    stale = []
    for area in sorted((DOCS / "decisions").glob("*.md")):
        for match in HEADING.finditer(FENCE.sub("", area.read_text())):
            for reference in re.findall(r"`([\w/]+/[\w.]+)`", match.group(2)):
                if not code_path_exists(reference):
                    stale.append(f"{area.name}: {reference}")
    assert not stale, f"decision titles name code that is gone (grep for its new name): {stale}"
