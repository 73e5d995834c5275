"""Read routing without servers: which standby a read tries, what a server is called in output, which
database holds a collection, and the settings that configure them (the servers themselves:
tests/test_replicas.py, tests/test_placement.py, tests/test_replica_drill.py)."""

from __future__ import annotations

import pytest

from retrieval.settings import Settings
from retrieval.store.placement import PlacementError, placed
from retrieval.store.replicas import address, choose


def test_reads_take_turns_over_the_standbys_not_being_skipped() -> None:
    standbys = ["a", "b", "c"]
    firsts = [choose(standbys, {}, now=100.0, turn=t)[0] for t in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]
    assert choose(standbys, {}, 100.0, 1) == ["b", "c", "a"]  # then the others, in order
    skipped = {"b": 110.0, "c": 90.0}  # b skipped until 110; c's skip is over
    assert choose(standbys, skipped, 100.0, 0) == ["a", "c"]
    assert choose(standbys, skipped, 111.0, 0) == ["a", "b", "c"]
    assert choose(standbys, {s: 200.0 for s in standbys}, 100.0, 0) == []  # all down: the primary


def test_a_server_is_named_by_host_and_port_never_by_its_password() -> None:
    assert address("postgresql://reader:s3cret@db2.internal:6432/handbooks") == "db2.internal:6432"
    assert address("host=10.0.0.7 user=x password=s3cret dbname=y") == "10.0.0.7:5432"
    assert address("postgresql://postgres@/postgres?host=/tmp/sock&port=5433") == "/tmp/sock:5433"


def test_standbys_and_placement_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://a/main")
    monkeypatch.setenv("CHAPTERVERSE_DB_READ_URLS", "postgresql://r1/main, postgresql://r2/main,")
    monkeypatch.setenv("CHAPTERVERSE_DB_PLACEMENT", '{"slack-T2": {"url": "postgresql://b/t2", '
                                                    '"read_urls": ["postgresql://b1/t2"]}}')
    s = Settings()
    assert [u.get_secret_value() for u in s.db.read_urls] == ["postgresql://r1/main", "postgresql://r2/main"]
    t2 = placed(s, ["slack-T2"])
    assert t2.db.url.get_secret_value() == "postgresql://b/t2"
    assert [u.get_secret_value() for u in t2.db.read_urls] == ["postgresql://b1/t2"]
    assert placed(t2, ["slack-T2"]) is t2  # placed once: nothing left to place
    assert placed(s, ["slack-T1"]) is s and placed(s, None) is s  # unplaced, or unscoped: DATABASE_URL
    with pytest.raises(PlacementError, match="different databases"):
        placed(s, ["slack-T1", "slack-T2"])


def test_a_malformed_placement_is_a_configuration_error_that_shows_no_url(monkeypatch) -> None:
    from retrieval.clikit import configuration_error

    monkeypatch.setenv("CHAPTERVERSE_DB_PLACEMENT", '{"t2": {"uri": "postgresql://u:s3cret@b/x"}}')
    with pytest.raises(ValueError) as info:
        Settings()
    line = configuration_error(info.value)
    assert "CHAPTERVERSE_DB_PLACEMENT" in line and "s3cret" not in line
