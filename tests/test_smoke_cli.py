from tests.conftest import run_cli


def test_help_lists_subcommands():
    res = run_cli("--help")
    assert res.returncode == 0
    for cmd in ("ingest", "docs", "remove", "search", "db", "eval"):
        assert cmd in res.stdout


# Runs the real command in a new process and reports, at exit, whether a model runtime or a model library
# was imported: torch, onnxruntime (the passage and query encoders), transformers, sentence-transformers or
# tokenizers. Those imports are what makes a command slow; how fast the commands are is measured in
# results/speed/, not asserted here (CPU time under a loaded CI machine is not a stable figure).
HEAVY = ("torch", "onnxruntime", "transformers", "sentence_transformers", "tokenizers")
PROBE = """
import atexit, sys
HEAVY = %r
atexit.register(lambda: sys.stderr.write("\\nmodel-loaded=%%s\\n" %% sorted(set(HEAVY) & set(sys.modules))))
from retrieval.cli import main
sys.argv = ["chapterverse", *sys.argv[1:]]
main()
""" % (HEAVY,)


def _probe(*args: str, tmp_path=None):
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ))
    assert "model-loaded=" in res.stderr, f"the probe did not report: {res.stderr}"
    loaded = "model-loaded=[]" not in res.stderr
    return res, loaded


def test_commands_that_need_no_model_never_load_one(settings, tmp_path):
    """docs, db status, remove, an unchanged re-ingest and rejected inputs import no model runtime or model
    library (what made them take seconds). Their wall time is measured in results/speed/, not here."""
    from tests.pdfgen import text_pdf

    known = text_pdf(tmp_path / "known-doc.pdf", ["Carburetor heat is applied before reducing power. " * 8])
    res, loaded = _probe("ingest", str(known), "--collection", "smoke")
    assert res.returncode == 0, res.stderr
    assert loaded, "the probe can tell: a new document needs the model"
    not_pdf = tmp_path / "notes.pdf"
    not_pdf.write_text("plain text, not a PDF")
    cases = {
        "docs": ("docs", "--json"),
        "db status": ("db", "status"),
        "unchanged re-ingest": ("ingest", str(known), "--collection", "smoke"),
        "not a PDF": ("ingest", str(not_pdf), "--collection", "smoke"),
        "missing file": ("ingest", str(tmp_path / "missing.pdf"), "--collection", "smoke"),
        "remove": ("remove", "no-such-document.pdf", "--collection", "smoke"),
    }
    for name, args in cases.items():
        res, loaded = _probe(*args)
        assert not loaded, f"{name}: loaded a model runtime\n{res.stderr}"
        assert "Traceback" not in res.stderr, res.stderr
    res, _ = _probe("ingest", str(known), "--collection", "smoke")
    assert res.returncode == 0 and "unchanged" in res.stdout
