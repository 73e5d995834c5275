-- The document's title (declared in the PDF, else its readable file name); indexed with every chunk.
ALTER TABLE documents ADD COLUMN title text;
