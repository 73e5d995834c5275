"""A Ctrl-C that a library turned into another error is still a Ctrl-C (pure logic).

Python raises KeyboardInterrupt wherever the main thread is when SIGINT arrives. Inside the import of
an extension module built with pybind11 (onnxruntime) it comes out as ImportError("initialization
failed") chained from the KeyboardInterrupt, and transformers' lazy imports wrap errors in a
RuntimeError the same way. A broad ``except Exception`` around a model load then read the Ctrl-C as a
broken model: the ingest went on (exporting the model again, about 30 s) and stored the document the
user had interrupted. Each such handler calls ``reraise_interrupt`` first.
"""

from __future__ import annotations


def interrupted(exc: BaseException) -> bool:
    """``exc`` is, or was raised while handling or because of, a KeyboardInterrupt (its ``__cause__``
    and ``__context__`` chain)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return True
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return False


def reraise_interrupt(exc: BaseException) -> None:
    """Raise KeyboardInterrupt when ``exc`` came of one (``interrupted``); return otherwise."""
    if interrupted(exc) and not isinstance(exc, KeyboardInterrupt):
        raise KeyboardInterrupt from exc
