"""Finding passages: the keyword leg (``keyword``, BM25 over Postgres full text), the dense leg
(``vector``, pgvector), reciprocal rank fusion (``fuse``), the sentence rerank (``rerank``,
``sentence_index``), documents named in a question (``named``), scopes (``filters``), the term
statistics kept at ingest (``term_stats``) and the orchestration of one search (``search``)."""
