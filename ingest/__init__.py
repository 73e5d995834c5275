"""PDF → pages (visible text, printed labels) → chunks → embeddings, one transaction per document."""
