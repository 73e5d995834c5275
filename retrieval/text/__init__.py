"""The one text toolkit shared by ingest and answers: normalisation for matching (``textnorm``),
identifiers and option names (``identifiers``), sentence and paragraph spans (``spans``), table rows
(``tables``), prompt-injection patterns (``injection``) and URLs as they may be stored and shown
(``urls``). Pure functions over strings; no I/O, no PDF parsing."""
