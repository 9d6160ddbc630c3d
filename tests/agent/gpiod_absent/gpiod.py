"""Put first on PYTHONPATH, this makes `import gpiod` fail as on a node without the bindings,
whether or not the machine running the tests has them."""

raise ImportError("gpiod is hidden for this test")
