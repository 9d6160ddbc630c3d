"""The largest dataset a decoder accepts (and a trial sends): a decoded message's memory is
bounded by these, whatever its body claims. Apart from the codecs so that the workload's
declaration reads them without loading the codecs' libraries."""

# A 1024 x 1024 matrix is 8 MiB of values.
MAX_SIDE = 1024
MAX_RECORDS = 1_000_000
