"""``python -m tickwheel``: the same as the ``tickwheel`` command."""

import sys

from tickwheel.cli import main

sys.exit(main())
