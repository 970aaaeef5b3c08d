"""``python -m nbxtensor.cli`` runs the ``nbx`` command."""

import sys

from . import main

sys.exit(main())
