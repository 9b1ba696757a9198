"""The public path of ``tvm_twill.integrations.dlight``: the same module object under its old name."""
import sys

from .integrations import dlight as _module

sys.modules[__name__] = _module
