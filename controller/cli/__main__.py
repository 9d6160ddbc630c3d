"""`python -m controller.cli` is the `h2iot` command."""

import sys

from controller.cli import main

sys.exit(main())
