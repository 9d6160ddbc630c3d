"""The agent's subcommands, one module each: `register` declares its options, `run` does it.

Declaring must stay cheap (the controller checks a node with `--version`, which parses the
whole command line): each `run` imports what it needs when it runs.
"""
