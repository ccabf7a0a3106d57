"""``python -m harness.faults [--vm] …``: fault injection on the lab (see :mod:`harness.faults.cli`)."""

import sys

from harness.faults.cli import main

sys.exit(main())
