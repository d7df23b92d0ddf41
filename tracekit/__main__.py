"""`python -m tracekit ...` is the `tracekit` command."""

import sys

from .cli import main

sys.exit(main())
