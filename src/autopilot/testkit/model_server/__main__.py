"""Run the scripted model server: ``python -m autopilot.testkit.model_server --help``."""

import sys

from autopilot.testkit.model_server.cli import main

sys.exit(main())
