"""What the workers of one test run make once and share (``pytest -n 2``): the session embedder's ONNX
exports and the vectors of the session corpora (``conftest.dev_corpus``, ``corpus2_fixture.manuals_corpus``).

Each worker has a home and a database of its own; without this each one exported the encoders (about 16
CPU-seconds) and embedded the FAA dev corpus (about 40) and R-intro for itself, on the same two cores. The
first worker to need one of these makes it under an exclusive lock on a file in the run's folder; the
others wait for it and take its result. Vectors are taken only for exactly the texts they were made of, by
the same model, on the same machine: what the waiting worker would have computed. Tests that check
exporting or embedding themselves use homes and embedders of their own, never these.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """A folder every worker of this run sees: the run's base temporary folder (under xdist, the parent
    of each worker's own)."""
    base = factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    folder.mkdir(exist_ok=True)
    return folder


@contextmanager
def once(folder: Path, name: str) -> Iterator[Path]:
    """``folder / name`` (a folder), held under an exclusive lock for the ``with`` block: one worker at a
    time makes or takes what it holds. The lock goes with the process, however it ends."""
    place = folder / name
    place.mkdir(exist_ok=True)
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield place
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def link_tree(src: Path, dst: Path) -> None:
    """``src`` copied to ``dst`` as hard links (copies across file systems)."""

    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link, dirs_exist_ok=True)


def shared_exports(place: Path, roots: Sequence[Path], make: Callable[[], None]) -> None:
    """The encoder exports at ``roots`` (the home's query and passage encoder folders): linked from
    ``place`` when a worker made them already, else made (``make``) and left in ``place`` for the others.
    An export is only ever replaced by a rename, never written in place, so a link cannot change another
    worker's copy."""
    done = place / "done"
    if done.exists():
        for root in roots:
            if (place / root.name).is_dir():
                link_tree(place / root.name, root)
    make()  # with the exports in place: loads them (and checks them, as every load does)
    if not done.exists():
        for root in roots:
            if root.is_dir():
                link_tree(root, place / root.name)
        done.touch()


class SharedVectors:
    """The session embedder, its ``embed_chunks`` taken from ``place`` when a worker of the run embedded
    exactly these passages already (a file named by the hash of the model, texts and sources), else
    computed by the embedder and written there. Everything else is the embedder's."""

    def __init__(self, embedder: Any, place: Path) -> None:
        self._embedder = embedder
        self._place = place

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed_chunks(self, indexed: Sequence[str], sources: Sequence[tuple[str | None, str]], *,
                     on_batch: Callable[[int], object] | None = None,
                     workers: int | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        key = hashlib.sha256(json.dumps([self._embedder.name, list(indexed), [list(s) for s in sources]])
                             .encode()).hexdigest()
        path = self._place / f"{key}.npz"
        if path.exists():
            with np.load(path) as saved:
                vectors, windows = saved["vectors"], [saved[f"w{i}"] for i in range(len(indexed))]
            if on_batch is not None:
                on_batch(len(indexed))
            return vectors, windows
        vectors, windows = self._embedder.embed_chunks(indexed, sources, on_batch=on_batch, workers=workers)
        partial = path.with_name(f"{key}.partial")
        with open(partial, "wb") as out:
            np.savez(out, vectors=vectors, **{f"w{i}": w for i, w in enumerate(windows)})
        partial.replace(path)
        return vectors, windows
