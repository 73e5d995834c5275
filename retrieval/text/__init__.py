"""The one text toolkit shared by ingest and answers: table rows (``tables``) and prompt-injection
patterns (``injection``). Pure functions over strings; no I/O, no PDF parsing."""
