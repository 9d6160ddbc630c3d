"""What the periodic workload's client and server agree on. A leaf."""

KIND = "periodic"
"""The workload's name, here so a light declaration (an engine's) can name it without loading
the spec, whose refusals ask the protocols' declarations."""
PATH_PREFIX = f"/{KIND}/"
"""A request's path: this, then the response's size in decimal."""
