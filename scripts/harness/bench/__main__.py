"""``python -m harness.bench``: the benchmarks of the pipeline (see :mod:`harness.bench`)."""

import sys

from harness.bench.run import main

sys.exit(main())
