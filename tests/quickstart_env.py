"""Run Python as the README's quick-start venv would (``pip install -e '.[tvm]'``): the test-only packages
(pytest, hypothesis) cannot be imported.  ``env(tmp_dir)`` returns the environment for a subprocess: a
``sitecustomize`` on PYTHONPATH installs a meta-path finder that refuses them."""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_ONLY = ("pytest", "_pytest", "hypothesis")

BLOCKER = '''
import sys


class _TestOnly:
    """Refuses the packages only the test extra installs."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the quick-start venv)", name=name)
        return None


sys.meta_path.insert(0, _TestOnly())
for _name in list(sys.modules):
    if _name.split(".")[0] in BLOCKED:
        del sys.modules[_name]
'''


def env(tmp_dir, blocked=TEST_ONLY) -> dict:
    """``blocked``: the top-level packages that cannot be imported (default: the test-only ones)."""
    tmp_dir = pathlib.Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    (tmp_dir / "sitecustomize.py").write_text(f"BLOCKED = {set(blocked)!r}\n" + BLOCKER, encoding="utf-8")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_dir), str(ROOT)]), MPLBACKEND="Agg")
