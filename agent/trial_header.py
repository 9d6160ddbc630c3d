"""The request header that tags every request of one trial with its id, so a server can account
the trial's CPU, memory and frames (agent/README.md, "Per-trial accounting"). A leaf: the
client, the server and the nghttp2 engine all name it from here."""

TRIAL_HEADER = "h2iot-trial-id"
