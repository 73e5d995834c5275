"""Keyword postings kept at ingest as packed binary (``lexeme_postings``, migration 0021).

For each document and each lexeme of its chunks' tsvectors, the chunks having the lexeme, in chunk id
order and blocks of at most 250 (one row each, also carried by the index on (lexeme, collection), which
the keyword leg reads alone: the rows of a lexeme are side by side there). A row has
``base``, its first chunk id, and 8-byte records (``POSTING``, big-endian): the chunk id minus base, and
the chunk's length times 512 plus the lexeme's term frequency in it (its positions in the tsvector,
at most 256; 1 for identifier terms, which have none; the length is ``greatest(token_count, 1)``).
That is everything BM25 needs of a posting besides the scope's statistics (IDF, average length),
which change with every document and so are never stored. The keyword leg (``retrieval.search.keyword``)
reads the rows of a question's lexemes and scores every posting in numpy, instead of one SQL row per
posting.

The rows are computed in SQL from the chunks as stored (``lexeme_postings_of``, migration 0021, which
also backfills the documents indexed before it) and removed with their document (ON DELETE CASCADE).
"""

from __future__ import annotations

import numpy as np

POSTING = np.dtype([("offset", ">i4"), ("dl_tf", ">i4")])
"""One posting as stored: ``int4send(chunk id - base) || int4send(dl * 512 + tf)``."""
TF_BITS = 9


def decode(bases: np.ndarray, counts: np.ndarray, records: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chunk ids, term frequencies and lengths of ``records`` (``POSTING``), the concatenated postings of
    rows with these ``bases`` and record ``counts``."""
    ids = np.repeat(bases, counts) + records["offset"]
    dl_tf = records["dl_tf"].astype(np.int32)
    return ids, dl_tf & ((1 << TF_BITS) - 1), dl_tf >> TF_BITS  # tf, dl
