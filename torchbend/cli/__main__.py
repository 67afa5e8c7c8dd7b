"""``python -m torchbend.cli``: the ``torchbend`` command."""

import sys

from .main import main

if __name__ == "__main__":
    sys.exit(main())
