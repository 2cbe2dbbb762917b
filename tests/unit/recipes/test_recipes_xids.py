"""The XID knowledge table (recipes/knowledge/xids.yaml) loads with the catalog, and says what
NVIDIA's XID documentation says about the codes an SRE meets first.

Expected severities are written from NVIDIA's XID listing, the XID catalog and the A100
memory error management guide, mapped onto DESIGN's drift table: a GPU lost or memory that
can no longer be trusted is critical; a code whose cause is usually the application is info.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from plumb.aggregator.recipes import RecipeError, load_catalog
from plumb.aggregator.recipes.catalog import default_root


def test_every_row_has_a_meaning_an_action_and_an_nvidia_source(catalog):
    assert len(catalog.xids) >= 20
    for code, row in catalog.xids.items():
        assert row.code == code and row.meaning and row.action
        assert row.source.startswith("https://docs.nvidia.com/deploy/"), code


def test_lost_gpus_and_untrustworthy_memory_are_critical(catalog):
    assert catalog.xids[79].meaning == "GPU has fallen off the bus"
    for code in (48, 64, 79, 95):
        assert catalog.xids[code].severity == "critical", code


def test_codes_usually_caused_by_the_application_are_info(catalog):
    for code in (13, 31, 43):
        assert catalog.xids[code].severity == "info", code


def test_contained_errors_and_pending_remaps_are_warnings(catalog):
    assert "Contained" in catalog.xids[94].meaning
    assert "Uncontained" in catalog.xids[95].meaning
    for code in (63, 92, 94):
        assert catalog.xids[code].severity == "warning", code


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    root = tmp_path / "recipes"
    shutil.copytree(default_root(), root)
    return root


def test_a_bad_severity_or_a_repeated_code_fails_loading_naming_the_line(recipes):
    table = recipes / "knowledge" / "xids.yaml"
    text = table.read_text()
    table.write_text(text.replace("severity: critical", "severity: fatal", 1))
    with pytest.raises(RecipeError) as caught:
        load_catalog(recipes)
    assert "knowledge/xids.yaml:" in str(caught.value) and "severity" in str(caught.value)
    table.write_text(text.replace("code: 13\n", "code: 8\n", 1))
    with pytest.raises(RecipeError) as caught:
        load_catalog(recipes)
    assert "duplicate xid '8'" in str(caught.value)
