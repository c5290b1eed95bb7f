"""NormLab (归一化实验室): the helper package of the course.

Modules, one concern each:
    norms   reference BatchNorm / LayerNorm / RMSNorm / GroupNorm / InstanceNorm
    viz     plot style with Chinese glyphs, small tables
    env     setup() for notebooks, the environment report
Import submodules explicitly, e.g. ``from normlab import norms``.
"""

from .env import report, seed_all, setup

__version__ = "0.1.0"
__all__ = ["setup", "seed_all", "report", "__version__"]
