"""The study's workload: fetch a page and its subresources (the default)."""
