"""What the periodic workload's client and server agree on. A leaf."""

PATH_PREFIX = "/periodic/"
"""A request's path: this, then the response's size in decimal."""
