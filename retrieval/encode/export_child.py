"""The ONNX exports written by a process of their own, so the process that asked never loads torch.

Exporting needs torch and the model (about 460 MB), and tracing and quantizing take several
hundred MB more: an ingest that exported in its own process peaked at 1.14 GB on the first run
of a fresh install, against 0.35-0.68 GB for every later one. Here each export (the query encoder,
then the passage encoder) runs in ``python -m retrieval.encode.export_child KIND MODEL CACHE``,
one after the other, and the asking process only loads the result.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

from retrieval.encode import passage_encoder as pe
from retrieval.encode import query_encoder as qe
from retrieval.lifetime import die_with_parent, parent_env
from retrieval.store.db import first_line

Kind = Literal["queries", "passages"]
TIMEOUT_S = 900  # an export takes 10-30 s on 2 cores; a hung tracer must not hang the ingest


def run(kind: Kind, model_path: str, cache_root: Path) -> None:
    """Write the ``kind`` export of the model at ``model_path`` under ``cache_root`` in a child
    process. Raises QueryEncoderError (one line saying why) when the child fails; a model that has
    no such export is not a failure (its meta says ``unsupported``)."""
    cmd = [sys.executable, "-m", "retrieval.encode.export_child", kind, model_path, str(cache_root)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
                              env={**os.environ, **parent_env()})  # it dies with this process (kill -9 too)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise qe.QueryEncoderError(f"the {kind} export process did not finish: {first_line(exc)}") from exc
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise qe.QueryEncoderError(f"the {kind} export process failed (exit status {done.returncode}): "
                                   f"{lines[-1] if lines else 'no message'}")


def _load(model_path: str, eager: bool):
    """The model to export: with plain attention for the passage export (``passage_encoder.eager_model``)."""
    model = pe.eager_model(model_path) if eager else None
    if model is None:
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415  (torch: only in this child)

        model = SentenceTransformer(model_path, device="cpu")
    return model


def main() -> None:
    die_with_parent()
    kind, model_path, cache_root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if kind not in ("queries", "passages"):
        sys.exit(f"unknown export {kind!r} (queries or passages)")
    try:
        model = _load(model_path, eager=kind == "passages")
        meta = (pe.export if kind == "passages" else qe.export)(model, model_path, cache_root)
    except (qe.QueryEncoderError, OSError) as exc:
        sys.exit(first_line(exc))
    print(meta.unsupported or "written")


if __name__ == "__main__":
    main()
