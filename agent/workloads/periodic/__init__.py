"""IoT traffic as nodes send it: a small report or poll every interval, the node idle between,
over a kept, a new or a resumed connection (issue 37)."""
