from __future__ import annotations

import pytest

from appliance.edges.crashcheck import run_crash_check


@pytest.mark.duckdb_only  # the crash check kills writers of a DuckDB file
def test_sigkill_during_records_loses_nothing_acknowledged(tmp_path) -> None:  # type: ignore[no-untyped-def]
    report = run_crash_check(tmp_path, kills=8, seed=1)
    assert report.kills == 8
    assert report.acknowledged > 0  # records were being written when the kills landed
    assert report.lost == 0 and report.corrupt == 0, report.problems
