"""Writing micro-batches to Delta tables, exactly once."""
