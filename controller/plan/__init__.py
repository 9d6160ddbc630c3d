"""`h2iot plan`'s controller side: what the config's meter resolves (`meter_record`) and the
plan as the terminal shows it (`view`). The plan's arithmetic is `analysis.plan`'s."""
