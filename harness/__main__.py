"""`python -m harness ...` runs the `mmle score` subcommand on its own."""

import sys

from harness.cli import main

sys.exit(main())
