"""python -m normlab.course init [DIR] | reset NAME [DIR]: the same command as normlab-course."""

import sys

from . import main

sys.exit(main())
