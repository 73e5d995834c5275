"""Whether a document's stored text can be searched and quoted as it reads (pure functions).

A text layer can be present and still be useless, silently: an old PDF whose Cyrillic or Greek text
comes out as Latin-1 letters ("Èñõîäíûå ôàéëû" for "Исходные файлы"), or text in a script that the
keyword search does not cut into words and the English embedding model does not read (Chinese,
Japanese, Korean, Thai). Ingest stores such a document as it is; ``note`` is the one line that tells
the person who added it (the command's ``warning:`` line, the bot's reply), naming pages and examples.

Glyphs a PDF maps to no character (stored as U+FFFD, shown as "�") are not noted: most manuals have a
few, in formulas and symbols (28 of the 96 PDFs tried had ten or more), and a quote shows them as they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ingest.pdf import Page

LATIN1_SHARE = 0.3  # letters in U+00C0-U+00FF, of all letters, from which a text may be mis-encoded
LATIN1_WORDS = 0.2  # ... and words made of those letters only, of all words of 3+ letters
UNSPLIT_SHARE = 0.1  # characters of scripts without spaces between words, of all letters (one such character is
# about a word, five Latin letters are: a Chinese manual of LaTeX commands has 0.14, a Japanese reference 0.48)

_LETTER_RUN = re.compile(r"[^\W\d_]{3,}")
_LATIN1 = re.compile(r"[\u00c0-\u00ff]")
_LATIN1_WORD = re.compile(r"[\u00c0-\u00ff]{3,}")
_UNSPLIT = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _pages(numbers: Sequence[int]) -> str:
    shown = ", ".join(f"p. {n}" for n in numbers[:3])
    return shown + (f" and {len(numbers) - 3:,} more" if len(numbers) > 3 else "")


def misencoded_note(pages: Sequence[Page]) -> str:
    """Text that reads as another alphabet decoded as Latin-1 ("" when it does not)."""
    text = "\n".join(p.text for p in pages)
    words = _LETTER_RUN.findall(text)
    letters = sum(map(len, words))
    odd = [w for w in words if _LATIN1_WORD.fullmatch(w)]
    if not letters or len(_LATIN1.findall(text)) < LATIN1_SHARE * letters or len(odd) < LATIN1_WORDS * len(words):
        return ""
    where = [p.number for p in pages if _LATIN1_WORD.search(p.text)]
    examples = ", ".join(f"\u201c{w}\u201d" for w in list(dict.fromkeys(odd))[:3])
    return (f"its text layer looks mis-encoded ({examples} on {_pages(where)}: letters of another alphabet read "
            "as Latin-1): search and quotes will show them so; a PDF with a correct text layer is needed")


def unsplit_note(pages: Sequence[Page]) -> str:
    """Much text in a script written without spaces between words ("" when there is little)."""
    text = "\n".join(p.text for p in pages)
    letters = sum(len(w) for w in re.findall(r"[^\W\d_]+", text))
    unsplit = len(_UNSPLIT.findall(text))
    if not letters or unsplit < UNSPLIT_SHARE * letters:
        return ""
    return ("much of its text is in a script written without spaces between words (Chinese, Japanese, Korean or "
            "Thai): keyword search finds only whole runs between punctuation in it and the embedding model reads "
            "English, so expect few answers from it")


def note(pages: Sequence[Page]) -> str:
    """One line naming every problem found ("" for a document that reads as it should)."""
    return "; ".join(n for n in (misencoded_note(pages), unsplit_note(pages)) if n)
