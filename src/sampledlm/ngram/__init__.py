"""Count-based n-gram language models (filled in by the n-gram issue)."""
