"""The toy meter source (tests/meter/toy_source): `spec` declares it, `tap` is its meter."""
