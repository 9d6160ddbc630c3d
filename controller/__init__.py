"""h2iot controller: configs, node transports, sweeps, the meter, the dashboard and the CLI."""
