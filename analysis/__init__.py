"""h2iot analysis: statistics, figures and reports over recorded runs under data/runs/."""
