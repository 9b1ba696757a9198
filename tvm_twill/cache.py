"""The public path of ``tvm_twill.planner.cache`` (``PlanCache``, ``SHARED``): the same module object."""
import sys

from .planner import cache as _module

sys.modules[__name__] = _module
