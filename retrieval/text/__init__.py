"""The one text toolkit shared by ingest and answers: table rows (``tables``), prompt-injection
patterns (``injection``) and URLs as they may be stored and shown (``urls``). Pure functions over
strings; no I/O, no PDF parsing."""
