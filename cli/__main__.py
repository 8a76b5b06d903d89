"""``python -m mcp_blackbox.cli``: the same as the ``mcp-blackbox`` command."""

import sys

from mcp_blackbox.cli.main import main

sys.exit(main())
