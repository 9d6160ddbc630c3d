"""A small workload for the tests: GET a deterministic body of a given size, several times."""
