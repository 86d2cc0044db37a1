"""``python -m lab.soak`` (``make soak``): see lab/soak/run.py."""

import sys

from lab.soak.run import main

sys.exit(main())
