"""The model answerers (``gemini``, ``openai``): everything they share (``structured``: output models,
validation, retries, the client cache), the prompts (``prompt``), the process-wide cap on model calls
(``slots``), one module per provider call (``gemini``, ``openai_compat``), and the checks a verified
model draft must still pass (``checks``, with the answer-text check in ``support``)."""
