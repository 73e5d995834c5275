-- depends: 0023_collection_writes
-- How a page's words were read (ingest.reading): 'text' (its text layer), 'ocr' (our OCR of the page
-- image) or 'scan-layer' (the invisible text a scanner's OCR laid over the image). Quotes from a page
-- not read from its text layer say "read by OCR": they are checked against the OCR text, not the image.
-- ocr_confidence: our OCR's mean confidence in the page's words; ocr_doubtful: words holding a digit
-- that it read with low confidence (a quote holding one is marked).
ALTER TABLE pages ADD COLUMN read_by text NOT NULL DEFAULT 'text'
    CHECK (read_by IN ('text', 'ocr', 'scan-layer'));
ALTER TABLE pages ADD COLUMN ocr_confidence real;
ALTER TABLE pages ADD COLUMN ocr_doubtful text[] NOT NULL DEFAULT '{}';
