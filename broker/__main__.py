"""`python -m broker`: the `gregor` command (broker/cli/main.py)."""

import sys

from broker.cli.main import main

sys.exit(main())
