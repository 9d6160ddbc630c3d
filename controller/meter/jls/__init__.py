"""Joulescope recordings imported into a run after its sweep (`h2iot meter import`).

A Joulescope (JS110/JS220) is driven by its own UI: the sweep runs with the client's trial
marker wired to GPI0, the UI records a JLS v2 file, and the import cuts each trial's window out
of it by the marker's pulses. `pulses` and `windows` are the sans-IO core (pure functions over
numpy arrays); `recording` is the thin reader over pyjls (imported only there, lazily); `run`
matches the pulses to the run's trials and writes each trial's trace and energy as a live meter
does.
"""
