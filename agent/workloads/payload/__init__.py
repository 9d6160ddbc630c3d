"""The payload workload: POST a dataset (a float matrix or an array of records) in one of six
encodings, SOAP as XML text, SOAP with a MIME attachment (SwA), SOAP over DIME, JSON, CBOR or raw
bytes; the server decodes it into values, checks them against the client's digest and answers an
empty body."""
