"""The pure cores' transcripts (``testdata/<driver>/*.txt``): see ``datadriven`` for the format."""

from __future__ import annotations

from pathlib import Path

import pytest

from .datadriven import run_file
from .members import MembersDriver
from .peers import PeersDriver
from .pipeline import PipelineDriver

DATA = Path(__file__).parent / "testdata"


def files(driver: str) -> list[Path]:
    found = sorted((DATA / driver).glob("*.txt"))
    assert found, f"no transcripts under {DATA / driver}"
    return found


@pytest.mark.parametrize("path", files("pipeline"), ids=lambda p: p.stem)
def test_request_pipeline(path: Path) -> None:
    run_file(path, PipelineDriver().run)


@pytest.mark.parametrize("path", files("member"), ids=lambda p: p.stem)
def test_member_cores(path: Path) -> None:
    run_file(path, MembersDriver().run)


@pytest.mark.parametrize("path", files("peer"), ids=lambda p: p.stem)
def test_member_lifecycle(path: Path) -> None:
    run_file(path, PeersDriver().run)
