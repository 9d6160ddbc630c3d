"""The payload workload's declaration."""

from agent.protocols import PROTOCOLS
from agent.workloads.payload.limits import MAX_RECORDS, MAX_SIDE
from agent.workloads.spec import Field, Param, WorkloadSpec

ENCODING_NAMES = ("soap", "swa", "dime", "json", "cbor", "raw")
# The largest SOAP body of the largest matrix (1024 x 1024, about 25 MiB) fits. JSON's and CBOR's
# decoders build their whole tree before it is checked: a hostile 32 MiB JSON array of floats
# took 353 MiB while it was parsed (measured), so a 1 GiB node may want a lower limit.
DEFAULT_BODY_LIMIT_BYTES = 32 * 2**20

PAYLOAD = WorkloadSpec(
    protocols=PROTOCOLS,  # its client and server run over HTTP/3 too
    kind="payload",
    doc=(
        "POST `messages` datasets (a square float64 matrix or an array of records of string, "
        "int32, bool) "
        "in one encoding; the server decodes each, checks its digest and answers an empty body"
    ),
    params=(
        Param(
            "data",
            "choice",
            "matrix",
            "",
            "what a message carries: a square float64 matrix or an array of records",
            choices=("matrix", "structs"),
        ),
        # Not the reference's "n" and "m": "n" is also the sample count of every summary row.
        Param(
            "matrix_side",
            "int",
            64,
            "",
            "the matrix is matrix_side x matrix_side float64 values (data = matrix)",
            minimum=1,
            maximum=MAX_SIDE,
        ),
        Param(
            "record_count",
            "int",
            1000,
            "",
            "records in the array (data = structs)",
            minimum=0,
            maximum=MAX_RECORDS,
        ),
        Param(
            "encoding",
            "choice",
            "soap",
            "",
            "how the dataset is written: SOAP text, SOAP + MIME attachment, SOAP over DIME, "
            "JSON, CBOR, or raw packed bytes",
            choices=ENCODING_NAMES,
        ),
        Param(
            "messages",
            "int",
            8,
            "",
            "messages per trial, one after another",
            minimum=1,
            maximum=10_000,
        ),
        Param(
            "dime_chunk_bytes",
            "int",
            0,
            "bytes",
            "DIME only: data bytes per chunk record (0: one record)",
            minimum=0,
            maximum=2**26,
        ),
        Param(
            "seed", "int", 0, "", "seed of the deterministic dataset", minimum=0, maximum=2**63 - 1
        ),
        Param(
            "body_limit_bytes",
            "int",
            DEFAULT_BODY_LIMIT_BYTES,
            "bytes",
            "largest request body the server takes; a larger one is answered 413 and the rest "
            "refused",
            "server",
            minimum=1,
            maximum=2**30,
        ),
    ),
    fields=(
        Field("message_count", "messages the server decoded and verified"),
        Field("values_per_message", "matrix values or records in one message"),
        Field("request_body_bytes", "body bytes of one message, bytes"),
        Field("latency_mean_s", "mean of request sent -> response end, s"),
        Field("latency_p50_s", "median of request sent -> response end, s"),
        Field("client_serialise_cpu_s", "client CPU to encode one message (mean), s"),
        Field("client_deserialise_cpu_s", "client CPU to read one response (mean), s"),
        Field("server_deserialise_cpu_s", "server CPU to decode one message (mean), s"),
        Field("server_parse_rss_peak_bytes", "largest server peak RSS while decoding, bytes"),
        Field(
            "server_parse_rss_added_bytes", "largest rise of server RSS during one decode, bytes"
        ),
    ),
    extra="payload",
)
