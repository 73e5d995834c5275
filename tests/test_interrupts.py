"""A Ctrl-C that a library wrapped in another error is found in the error's chain (``retrieval.interrupts``);
the command-line behaviour is tested in tests/test_first_hour.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from retrieval.interrupts import interrupted, reraise_interrupt


def _wrapped(how: str) -> Exception:
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as k:
            if how == "cause":  # pybind11: ImportError("initialization failed") from the interrupt
                raise ImportError("initialization failed") from k
            raise RuntimeError("Failed to import transformers.models.bert")  # raised while handling it
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize("how", ["cause", "context"])
def test_an_error_raised_from_or_while_handling_a_ctrl_c_is_a_ctrl_c(how: str) -> None:
    exc = _wrapped(how)
    assert interrupted(exc)
    with pytest.raises(KeyboardInterrupt):
        reraise_interrupt(exc)


def test_an_ordinary_error_is_left_to_its_handler() -> None:
    try:
        try:
            raise ValueError("bad export")
        except ValueError as v:
            raise ImportError("initialization failed") from v
    except ImportError as exc:
        assert not interrupted(exc)
        reraise_interrupt(exc)  # returns: the caller handles it as before


# the console command (retrieval.warm.main) with a Ctrl-C arriving while Python loads the command line
_CTRL_C_WHILE_LOADING = """
import sys
class CtrlCWhileLoading:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, CtrlCWhileLoading())
sys.argv = ["chapterverse", *sys.argv[1:]]
from retrieval.warm import main
main()
"""


@pytest.mark.parametrize("command", [["docs"], ["search", "magneto drop"]])
def test_a_ctrl_c_while_the_command_loads_ends_it_with_one_line_and_status_130(command: list[str], tmp_path) -> None:
    env = {**os.environ, "CHAPTERVERSE_HOME": str(tmp_path), "CHAPTERVERSE_DB_WARM_S": "0"}
    res = subprocess.run([sys.executable, "-c", _CTRL_C_WHILE_LOADING, *command], capture_output=True, text=True,
                         timeout=120, env=env)
    assert (res.returncode, res.stdout, res.stderr) == (130, "", "interrupted\n")
