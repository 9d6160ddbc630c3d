"""Device emulation: local nodes made as slow and small as the study's Raspberry Pis (or
smaller), on their own network namespaces.

- `profile`: device profiles (CPU quota, pinning, memory) and the published Pi 3B figure;
- `hierarchy` (sans-IO) and `cgroup`: a node's cgroup, v1 or v2;
- `netns`: two namespaces joined by a veth data link;
- `probe` and `calibrate`: the quota that makes this machine's core as fast as a Pi's;
- `emulation`: what a sweep sets up; `memory_pair`: failed trials that name an OOM kill.

This module imports nothing, so the config package can use `profile` without a cycle.
"""
