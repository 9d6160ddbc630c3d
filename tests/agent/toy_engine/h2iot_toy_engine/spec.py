"""The toy engine's declaration, found through the `h2iot.engines` entry point."""

from agent.engines.spec import EngineSpec
from agent.workloads.blob.spec import BLOB

TOY = EngineSpec(
    name="toy",
    doc="nghttpd serving the blob workload's bodies as files, over cleartext HTTP/2",
    label="toy (nghttpd files)",
    client_tool=None,
    server_tool="nghttpd",
    serve="h2iot_toy_engine.serve:serve",
    server_settings=(),
    protocols=("h2c",),
    workloads=(BLOB.kind,),
)
