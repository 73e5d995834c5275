"""The replica drill as CI runs it: ``chapterverse eval replica-drill`` on the sample PDFs and every dev
question (32): a primary and two streaming standbys started here, every question answered through the
standbys identically to the primary alone, no error while the standbys are stopped mid-question, and
read-your-writes after the ingest and after a removal (chapterverse_lab.replica_drill). About 2 minutes on
2 quiet cores (3.6 minutes with the machine shared), most of it the ingest."""

from __future__ import annotations

import json

import pytest

from tests.conftest import CORPUS, DEV_QUESTIONS, run_cli

pytestmark = pytest.mark.slow


def test_the_replica_drill_passes() -> None:
    done = run_cli("eval", "replica-drill", "--corpus", str(CORPUS), "--questions", str(DEV_QUESTIONS), timeout=1200)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    report = json.loads(lines[0])
    assert done.returncode == 0 and report["passed"], report
    assert report["user_errors"] == 0 and report["through_standbys_both_up"] == "32/32"
    assert report["questions_asked"] == report["answered"] == report["identical_to_single_server"] == 66
    assert report["read_your_writes"]["after_ingest"]["held"] and report["read_your_writes"]["after_removal"]["held"]
    assert sum(n for server, n in report["reads_per_server"].items() if server.startswith("replica ")) >= 32
