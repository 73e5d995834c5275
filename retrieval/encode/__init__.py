"""Text to vectors: the embedding model and its settings (``embed``), the ONNX query encoder
(``query_encoder``) and the int8 ONNX passage encoder used at ingest (``passage_encoder``)."""
