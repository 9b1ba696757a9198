"""The public path of ``tvm_twill.integrations.metaschedule``: the same module object under its old name."""
import sys

from .integrations import metaschedule as _module

sys.modules[__name__] = _module
