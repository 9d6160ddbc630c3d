"""The request header that tags every request of one trial with its id, so a server can account
the trial's CPU, memory and frames (agent/README.md, "Per-trial accounting"). A leaf: the
client, the server and the nghttp2 engine all name it from here."""

TRIAL_HEADER = "h2iot-trial-id"

TRIAL_CONTINUES_HEADER = "h2iot-trial-continues"
"""Sent (as "1") on a request whose trial goes on after it, possibly over another connection
(the periodic workload's new connection per exchange): a server keeps the trial open when the
connection ends, and records it when a connection carrying its last request does."""
