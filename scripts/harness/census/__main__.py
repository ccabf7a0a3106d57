"""``python -m harness.census``: the hostile-input census of the ``tunepath`` command (see :mod:`harness.census`)."""

import sys

from harness.census.cli import main

sys.exit(main())
