"""The `hypercorn` engine: hypercorn + Starlette serving the api workload's app over HTTP/2."""
