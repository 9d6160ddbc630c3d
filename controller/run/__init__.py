"""A run on disk: data/runs/<run-id>/ with manifest.json, trials.csv, power/, events.jsonl."""
