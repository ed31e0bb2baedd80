# SPDX-License-Identifier: Apache-2.0
"""Entry point for `python -m pmkit`."""

import sys

from pmkit.main import main

sys.exit(main())
