"""The blob workload's path; its bodies are agent.workloads.bodies'."""

# A blob's path: this, then its size in decimal.
PATH_PREFIX = "/blob/"
