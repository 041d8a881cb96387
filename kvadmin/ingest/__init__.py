"""KV event ingestion: decode engine batches, apply them to the kthena-compatible index."""
