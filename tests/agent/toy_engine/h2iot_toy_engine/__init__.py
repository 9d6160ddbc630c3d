"""An engine of one's own (issue 35): nghttpd serving the blob workload's bodies as files."""
