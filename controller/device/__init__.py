"""Device emulation: local nodes made as slow and small as the study's Raspberry Pis (or
smaller), on their own network namespaces.

- `hierarchy` (sans-IO) and `cgroup`: a node's cgroup, v1 or v2, limited as its device profile
  (`controller.config.profile`, part of the node's configuration) says;
- `netns`: two namespaces joined by a veth data link;
- `probe` and `calibrate`: the quota that makes this machine's core as fast as a Pi's;
- `emulation`: what a sweep sets up; `oom`: which node's memory limit the kernel enforced
  (the sweep's `memory_pair` names it in failed trials).
"""
