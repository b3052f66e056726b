"""Each knob is declared once (aipq/config.py KNOBS): its Settings default, command-line option and the guide's
options table (docs/guide/commands.md) come from that declaration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aipq.config import KNOBS, Settings, knob_table
from aipq.errors import BadInputError
from aipq.setting_aliases import ALIASES, alias_for

GUIDE = Path(__file__).parent.parent / "docs" / "guide" / "commands.md"


def test_the_guide_holds_the_generated_knob_table():
    text = GUIDE.read_text()
    found = re.search(r"<!-- knobs: begin[^\n]*-->\n(.*?)\n<!-- knobs: end -->", text, re.DOTALL)
    assert found is not None, "docs/guide/commands.md lost its knob table markers"
    assert found.group(1) == knob_table(), "regenerate the table: python scripts/options_table.py"


def test_settings_defaults_are_the_knobs_defaults():
    defaults = Settings()
    assert all(getattr(defaults, k.name) == k.default for k in KNOBS)


def test_every_knob_default_reads_back_from_its_command_line_text():
    for knob in KNOBS:
        if knob.flag:
            shown = knob.shown if knob.shown is not None else str(knob.default)
            assert knob.parse(shown) == knob.default, knob.name


def test_every_alias_names_a_knob():
    names = {k.name for k in KNOBS}
    assert all(knob in names for alias in ALIASES.values() for knob in alias.knobs)


def test_every_knob_has_its_own_setting_name():
    for knob in KNOBS:
        assert ALIASES[knob.setting].knob == knob.name
        assert ALIASES[knob.setting].parse(str(knob.shown if knob.shown is not None else knob.default),
                                           None) == knob.default


def test_an_unknown_aipq_setting_is_an_error_naming_the_known_ones():
    with pytest.raises(BadInputError, match="unknown aipq setting 'aipq.tpyo'") as error:
        alias_for("aipq.tpyo")
    assert "aipq.staging" in error.value.hint
    assert alias_for("mapred.job.name") is None  # other systems' names pass through
