"""PDF parsing in a child process with limits, so a hostile or broken PDF cannot take the bot down.

MuPDF is C: a crafted file can make it allocate gigabytes (a decompression bomb), spin for minutes
(a page tree of 100,000 pages, a 50 MB text layer) or crash. Here the parsing runs in a process of
its own (``python -m ingest.isolate``: a fresh interpreter, none of the caller's threads, sockets or
models; the PDF on its stdin, JSON lines back on a pipe of their own, never pickle, since what the
parser sends is as untrusted as the file), under

* an address-space limit (``RLIMIT_AS``, CHAPTERVERSE_PDF_MAX_MEMORY_MB) and a CPU-time limit
  (``RLIMIT_CPU``, CHAPTERVERSE_PDF_MAX_CPU_S), set by the child on itself before it reads the file
  and enforced by the kernel; a wall-clock limit of twice the CPU limit plus 30 s in the parent;
* a page limit (CHAPTERVERSE_PDF_MAX_PAGES), checked before any page is read;
* per page, a limit on the decompressed content streams (CHAPTERVERSE_PDF_MAX_PAGE_CONTENT_MB),
  checked before the page's text is laid out, and on the characters of visible text
  (CHAPTERVERSE_PDF_MAX_PAGE_CHARS);
* per document, a limit on the characters of visible text of all its pages
  (CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS), checked by the child as it reads and again here as the pages
  come: the pages are kept in this process, and a small file whose pages all draw one big content
  stream (issue 32: 100 KB, 500 pages of 180,000 characters) stays inside every per-page limit.

The child sends each page's parts (text, headings, hidden characters, label) as soon as it has read
the page; the running headers and footers, and so each page's body, are found here once every page
has come (``ingest.pdf.pages_from``), and the caller may start on the pages before that
(``ingest.ahead``).

The JSON lines go over a pipe of their own (``ingest.child``), not stdout, where MuPDF prints its
warnings and errors; its messages are collected (``TOOLS.mupdf_warnings``), sent as a ``warnings``
message and logged here. A damaged file MuPDF repairs (a truncated download, a broken
xref table) is ingested with what MuPDF recovers, and ``Parsed.damage`` says what was repaired.

Whatever happens in the child, the caller gets the pages or an ``InputError`` that says which limit
the file broke, what damage it has, or that the parser crashed; an ``InputError`` fails an ingest job
without a retry. The child costs about 0.3 s of start-up per document.
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ingest import child
from ingest.child import answer_on
from ingest.ocr import OcrOptions
from ingest.pdf import Heading, Page, PageParts, find_running_lines, pages_from
from ingest.sources import InputError, Source
from retrieval.text.injection import DEFAULT_RULES

# The child runs at a lower CPU priority than its parent: the parent embeds meanwhile (the pages
# already read, ``ingest.ahead``, or the previous document on the command line), and the passages
# being embedded are the ones awaited; the parse takes the CPU the embedding leaves. The CPU and
# wall-clock limits are unchanged (the CPU limit counts CPU seconds, whatever the priority).
PARSE_NICE = 10
MIN_TEXT_CHARS_PER_PAGE = 20  # below this on average, the PDF has no usable text layer
READ_BY = ("text", "ocr", "scan-layer")  # how a page's words were read (``ingest.reading``)
log = logging.getLogger(__name__)
MAX_WARNINGS = 20  # MuPDF messages kept per document (a badly damaged file repeats them per object)
_NARRATION = ("trying to repair broken xref", "repairing PDF document")  # MuPDF saying what it does, not the damage
_ALLOC_FAILED = re.compile(r"\b(?:m|c|re)alloc\b.*\bfailed|out of memory", re.IGNORECASE)  # MuPDF's words


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 2048
    cpu_s: int = 300
    max_pages: int = 5000
    max_page_content_mb: int = 32
    max_page_chars: int = 200_000
    max_document_chars: int = 12_000_000


@dataclass(frozen=True)
class Parsed:
    pages: list[Page]
    title: str
    damage: tuple[str, ...] = ()  # what MuPDF repaired or skipped (its messages), empty for a sound file

    def damage_note(self) -> str:
        """One line for the ingest's output when the file was damaged ("" when it was not)."""
        if not self.damage:
            return ""
        empty = [p.number for p in self.pages if not p.text.strip()]
        shown = "; ".join(self.damage[:3]) + ("; …" if len(self.damage) > 3 else "")
        lost = f"; {len(empty):,} of {len(self.pages):,} pages have no text" if empty else ""
        return f"damaged PDF, repaired by the parser ({shown}){lost}"


class _Refused(Exception):
    """A limit of ``Limits`` broken inside the child (the message says which)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _too_long(page: int, limits: Limits) -> str:
    return (f"its text passes {limits.max_document_chars:,} characters at page {page:,}; the limit is "
            f"{limits.max_document_chars:,} (CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS)")


def _memory(limits: Limits) -> str:
    return f"parsing it needs more than {limits.memory_mb:,} MB of memory (CHAPTERVERSE_PDF_MAX_MEMORY_MB)"


# ---------------------------------------------------------------------------------------------
# the child

def _apply(limits: Limits, ocr: OcrOptions) -> None:
    """The child's own limits. The CPU limit's hard ceiling leaves room for OCR: each page read by OCR
    raises the soft limit by ``ocr.page_cpu_s`` (``_more_cpu``), up to ``ocr.max_pages`` such pages."""
    mem = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    ceiling = limits.cpu_s + (ocr.max_pages * ocr.page_cpu_s if ocr.mode != "off" else 0)
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, ceiling + 5))  # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.nice(PARSE_NICE)


def _more_cpu(seconds: int) -> None:
    """Raise the child's soft CPU limit by ``seconds`` (within the hard ceiling ``_apply`` set)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (min(soft + seconds, max(hard - 5, soft)), hard))


def _content_bytes(doc: Any, page: Any) -> int:
    """Decompressed bytes of a page's content streams (each read under the memory limit)."""
    return sum(len(doc.xref_stream(xref) or b"") for xref in page.get_contents())


def _warnings(pymupdf: Any, seen: list[str]) -> list[str]:
    """MuPDF's messages since the last call that were not seen before (``seen`` is updated)."""
    new: list[str] = []
    for line in str(pymupdf.TOOLS.mupdf_warnings(reset=True) or "").splitlines():
        line = " ".join(line.split())
        if line and line not in seen and not line.startswith("... repeated") and line not in _NARRATION \
                and len(seen) < MAX_WARNINGS:
            seen.append(line)
            new.append(line)
    return new


def _damaged(seen: list[str]) -> str:
    return f" ({'; '.join(seen[:3])})" if seen else ""


def _damage_only(exc: BaseException) -> bool:
    """An error of MuPDF's about the file's structure (a page lost to damage), not a limit."""
    if isinstance(exc, (MemoryError, _Refused)):
        return False
    message = _first_line(exc)
    return not _ALLOC_FAILED.search(message) and "bomb" not in message.lower()


def _parse_here(data: bytes, name: str, limits: Limits, send: Callable[[list], None],
                ocr: OcrOptions = OcrOptions()) -> None:
    """Parse, report progress, send the pages or the reason there are none (runs in the child)."""
    seen: list[str] = []
    chars = [0]  # characters of text sent so far
    ocr_pages = [0]  # pages read by OCR so far
    try:
        from ingest.mupdf import pymupdf  # noqa: PLC0415

        from ingest.ocr import Engine, OcrRefused  # noqa: PLC0415
        from ingest.pdf import document_title  # noqa: PLC0415
        from ingest.reading import looks_scanned, read_page  # noqa: PLC0415

        engine = Engine(ocr.threads)

        pymupdf.TOOLS.mupdf_display_errors(False)  # collected below and sent as ``warnings`` instead
        pymupdf.TOOLS.mupdf_display_warnings(False)

        def report() -> None:
            new = _warnings(pymupdf, seen)
            if new:
                send(["warnings", new])

        def report_page(i: int, parts: PageParts) -> None:
            chars[0] += len(parts.text)
            if chars[0] > limits.max_document_chars:
                raise _Refused(_too_long(i + 1, limits))
            report()
            send(["page", i + 1, parts.text, [[h.offset, h.text, h.larger] for h in parts.headings], parts.hidden,
                  parts.label, parts.read_by, parts.ocr_confidence, list(parts.ocr_doubtful)])

        def before_ocr(i: int) -> None:
            ocr_pages[0] += 1
            if ocr_pages[0] > ocr.max_pages:
                raise _Refused(f"more than {ocr.max_pages:,} of its pages need OCR; the limit is {ocr.max_pages:,} "
                               "(CHAPTERVERSE_OCR_MAX_PAGES)")
            _more_cpu(ocr.page_cpu_s)
            send(["ocr", i + 1])

        try:
            doc = pymupdf.open(stream=data, filetype="pdf")
        except Exception as exc:  # noqa: BLE001  (MuPDF raises several types for damaged files)
            _warnings(pymupdf, seen)
            raise _Refused(f"corrupt or unreadable PDF ({_first_line(exc)}){_damaged(seen)}") from exc
        report()
        if doc.is_repaired:  # MuPDF had to rebuild its structure: the messages are damage, not noise
            send(["repaired"])
        if doc.needs_pass or doc.is_encrypted:
            raise _Refused("encrypted PDF (password protected); decrypt it first")
        total = doc.page_count
        if total == 0:
            _warnings(pymupdf, seen)
            raise _Refused(f"damaged PDF: no pages could be recovered{_damaged(seen)}" if seen or doc.is_repaired
                           else "corrupt or unreadable PDF (no pages)")
        if total > limits.max_pages:
            raise _Refused(f"{total:,} pages; the limit is {limits.max_pages:,} (CHAPTERVERSE_PDF_MAX_PAGES)")
        if ocr.mode != "off" and total > ocr.max_pages:  # a long scan is refused before hours of OCR
            scanned = sum(1 for i in range(total) if looks_scanned(doc[i], ocr.mode))
            if scanned > ocr.max_pages:
                raise _Refused(f"{scanned:,} of its {total:,} pages need OCR; the limit is {ocr.max_pages:,} "
                               "(CHAPTERVERSE_OCR_MAX_PAGES)")
        send(["pages", total, document_title(doc, name)])
        for i in range(total):
            try:
                page = doc[i]
                size = _content_bytes(doc, page)
            except Exception as exc:  # noqa: BLE001  (a page a damaged file lost: skipped, and said)
                if not _damage_only(exc):
                    raise
                _warnings(pymupdf, seen)
                if len(seen) < MAX_WARNINGS:
                    seen.append(f"page {i + 1} unreadable ({_first_line(exc)})")
                send(["repaired"])
                report_page(i, PageParts("", (), 0, None))
                continue
            if size > limits.max_page_content_mb * 1024 * 1024:
                raise _Refused(f"page {i + 1} has {size / 1e6:.0f} MB of drawing instructions; the limit is "
                               f"{limits.max_page_content_mb} MB (CHAPTERVERSE_PDF_MAX_PAGE_CONTENT_MB)")
            try:
                parts = read_page(page, ocr, engine, lambda: before_ocr(i))
            except OcrRefused as exc:
                raise _Refused(f"page {i + 1}: {exc}") from None
            if len(parts[0]) > limits.max_page_chars:
                raise _Refused(f"page {i + 1} has {len(parts[0]):,} characters of text; the limit is "
                               f"{limits.max_page_chars:,} (CHAPTERVERSE_PDF_MAX_PAGE_CHARS)")
            report_page(i, parts)
        report()
        send(["done"])
    except _Refused as exc:
        send(["refused", str(exc)])
    except MemoryError:
        send(["refused", _memory(limits)])
    except Exception as exc:  # noqa: BLE001  (MuPDF's errors: the file is damaged, or memory ran out)
        message = _first_line(exc)
        if _ALLOC_FAILED.search(message):
            send(["refused", _memory(limits)])
        elif "bomb" in message.lower():
            send(["refused", f"a decompression bomb: a stream inflates far beyond its size ({message})"])
        else:
            send(["refused", f"corrupt or unreadable PDF ({message}){_damaged(seen)}"])


def main() -> None:
    """``python -m ingest.isolate FD LIMITS-JSON NAME OCR-JSON``: the PDF on stdin, JSON lines on
    descriptor FD (``ingest.child``)."""
    send = answer_on(int(sys.argv[1]))  # whatever MuPDF (C) or a library prints on stdout lands on stderr
    limits, name = Limits(**json.loads(sys.argv[2])), sys.argv[3]
    options = json.loads(sys.argv[4])
    ocr = OcrOptions(**{**options, "languages": tuple(options.get("languages", ("en",)))})
    _apply(limits, ocr)
    _parse_here(sys.stdin.buffer.read(), name, limits, send, ocr)


# ---------------------------------------------------------------------------------------------
# the parent

def _death(exitcode: int | None, limits: Limits, last_words: str = "") -> str:
    if exitcode == -signal.SIGXCPU:
        return f"parsing it took more than {limits.cpu_s} CPU seconds (CHAPTERVERSE_PDF_MAX_CPU_S)"
    if exitcode == -signal.SIGKILL:
        return f"the PDF parser was stopped (over its memory or {limits.cpu_s} CPU-second limit)"
    if exitcode is not None and exitcode < 0:
        return f"the PDF parser crashed on it ({signal.Signals(-exitcode).name})"
    said = f": {last_words}" if last_words else ""
    return f"the PDF parser stopped without an answer (exit status {exitcode}{said})"


def _last_line(text: str) -> str:
    """The last non-empty line of what the child wrote on stderr (at most 200 characters), or ""."""
    return next((line.strip()[:200] for line in reversed(text.splitlines()) if line.strip()), "")


def _parts(msg: list, number: int) -> PageParts | None:
    """A ``page`` message as page ``number``'s parts; None when it is not that (not our protocol)."""
    try:
        _, n, text, heads, hidden, label, read_by, confidence, doubtful = msg
        if int(n) != number or not isinstance(text, str) or not (label is None or isinstance(label, str)) \
                or read_by not in READ_BY or not (confidence is None or 0 <= float(confidence) <= 1):
            return None
        return PageParts(text, tuple(Heading(int(o), str(t), bool(b)) for o, t, b in heads), int(hidden), label,
                         read_by, None if confidence is None else float(confidence), tuple(str(w) for w in doubtful))
    except (TypeError, ValueError):
        return None


def _converse(messages: Iterable[list], kill: Callable[[], object], on_start: Callable[[int, str], object] | None,
              on_page: Callable[[PageParts], object] | None, damage: list[str], limits: Limits,
              name: str, repaired: list[bool], on_ocr: Callable[[int], object] | None = None,
              ) -> tuple[str, list[PageParts]] | str | None:
    """The title and every page's parts, the reason the child refused the file, or None (it died,
    or broke the protocol). MuPDF's messages are logged and added to ``damage``; ``repaired`` gets
    an entry when MuPDF had to repair the file or lost a page (otherwise the messages are noise of a
    sound file, such as "bogus font ascent/descent values")."""
    title: str | None = None
    total = chars = 0
    raw: list[PageParts] = []
    for msg in messages:  # a line that is not our protocol ends them: treated as a crash
        kind = msg[0]
        if kind == "pages" and title is None and len(msg) == 3 and isinstance(msg[1], int):
            total, title = msg[1], str(msg[2])
            if on_start:
                on_start(total, title)
        elif kind == "page" and title is not None:
            parts = _parts(msg, len(raw) + 1)
            if parts is None:
                return None
            chars += len(parts[0])
            if chars > limits.max_document_chars:  # the child's word is not taken for it
                kill()
                return _too_long(len(raw) + 1, limits)
            raw.append(parts)
            if on_page:
                on_page(parts)
        elif kind == "done" and title is not None and len(raw) == total:
            return title, raw
        elif kind == "repaired" and len(msg) == 1:
            repaired.append(True)
        elif kind == "ocr" and len(msg) == 2 and msg[1] == len(raw) + 1:
            if on_ocr:
                on_ocr(msg[1])
        elif kind == "warnings" and len(msg) == 2 and isinstance(msg[1], list):
            for warning in msg[1][:MAX_WARNINGS - len(damage)]:
                damage.append(str(warning)[:300])
                log.info("MuPDF: %s: %s", name, damage[-1])  # shown with --verbose
        elif kind == "refused" and len(msg) == 2:
            return str(msg[1])
        else:
            return None
    return None


class _Deadline:
    """The parent's wall-clock limit on the child, moved on by each page it starts to read by OCR."""

    def __init__(self, seconds: float, on_expiry: Callable[[], object]) -> None:
        self.at = time.monotonic() + seconds
        self.expired = threading.Event()
        self._done = threading.Event()
        self._on_expiry = on_expiry
        threading.Thread(target=self._watch, name="parse-deadline", daemon=True).start()

    def _watch(self) -> None:
        while not self._done.wait(max(0.05, min(1.0, self.at - time.monotonic()))):
            if time.monotonic() >= self.at:
                self.expired.set()
                self._on_expiry()
                return

    def extend(self, seconds: float) -> None:
        self.at += seconds

    def cancel(self) -> None:
        self._done.set()


def parse(src: Source, limits: Limits, on_start: Callable[[int, str], object] | None = None,
          on_page: Callable[[PageParts], object] | None = None, injection: tuple[str, ...] = DEFAULT_RULES,
          ocr: OcrOptions = OcrOptions(), on_ocr: Callable[[int], object] | None = None) -> Parsed:
    """The pages and title of ``src``, parsed in a limited child process. Raises InputError with the
    reason when the file is damaged, encrypted, scanned, breaks a limit or crashes the parser.

    The child sends each page's parts as soon as it has them: ``on_start(pages, title)`` is called
    before the first, ``on_page(parts)`` for each page in order (what a page is before the running
    headers and footers are known: ``ingest.pdf.page_parts``); the body bounds come once all are in.
    ``ocr``: how pages without usable text are read (``ingest.reading``); ``on_ocr(page)`` is called
    as the child starts reading a page by OCR (each such page moves the wall-clock limit on by twice
    its CPU allowance)."""
    wall_s = 2 * limits.cpu_s + 30
    damage: list[str] = []
    repaired: list[bool] = []
    with child.spawn("ingest.isolate", json.dumps(asdict(limits)), src.name, json.dumps(asdict(ocr)),
                     stdin=[src.data], wait_s=10) as kid:
        deadline = _Deadline(wall_s, kid.process.kill)  # a child blocked without using CPU (or too slow) is stopped

        def ocr_page(number: int) -> None:
            deadline.extend(2 * ocr.page_cpu_s)
            if on_ocr:
                on_ocr(number)

        try:
            result = _converse(kid.messages(), kid.process.kill, on_start, on_page, damage, limits, src.name, repaired,
                               ocr_page)
        finally:
            deadline.cancel()
    if result is None:
        why = (f"parsing it took longer than {wall_s} s; stopped" if deadline.expired.is_set()
               else _death(kid.process.returncode, limits, _last_line(kid.last_words)))
        raise InputError(f"{src.origin}: {why}")
    if isinstance(result, str):
        raise InputError(f"{src.origin}: {result}")
    title, raw = result
    pages = pages_from(raw, find_running_lines([r[0] for r in raw]), injection)
    visible = sum(len(p.text.strip()) for p in pages)
    if visible < MIN_TEXT_CHARS_PER_PAGE * len(pages) * 0.1 or visible < MIN_TEXT_CHARS_PER_PAGE:
        if damage and repaired:
            raise InputError(f"{src.origin}: damaged PDF: no text could be recovered from its {len(pages)} "
                             f"page(s) ({'; '.join(damage[:3])})")
        if ocr.mode == "off":
            raise InputError(f"{src.origin}: no extractable text in {len(pages)} page(s); it looks scanned, and "
                             "OCR is off (CHAPTERVERSE_OCR_MODE=auto reads scanned pages)")
        raise InputError(f"{src.origin}: no text in {len(pages)} page(s), not even by OCR: its pages are blank "
                         "or hold no readable text")
    return Parsed(pages, title, tuple(damage) if repaired else ())


if __name__ == "__main__":
    main()
