"""The sweep engine: plan the trials, run them on the nodes with the meter, record every row."""
