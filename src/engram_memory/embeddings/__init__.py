"""Local sentence-embedding models behind the engine's Embedder port (the optional `semantic` extra)."""
