from tests.conftest import run_cli


def test_help_lists_subcommands():
    res = run_cli("--help")
    assert res.returncode == 0
    for cmd in ("ingest", "docs", "remove", "search", "db", "eval"):
        assert cmd in res.stdout
