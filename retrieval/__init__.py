"""The shared retrieve → fuse → rerank → answer → verify module, plus storage and the CLI."""
