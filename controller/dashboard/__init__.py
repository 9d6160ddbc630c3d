"""The live dashboard: a pure view of the sweep's state, fed through a queue."""
