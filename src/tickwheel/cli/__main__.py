"""``python -m tickwheel.cli``: the same as the ``tickwheel`` command."""

import sys

from tickwheel.cli import main

sys.exit(main())
