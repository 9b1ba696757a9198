"""Bundled example graphs (``tvm-twill-graph/1``), shipped as package data.

The JSON files live here, in ``tvm_twill/data/graphs/``, so that an installed
``tvm-twill`` can solve them (``tvm-twill example NAME``) and the tests can
load them without a checkout; ``graphs/README.md`` says what the Twill paper
reports for each one.  This is the only copy: ``examples/graphs/README.md``
in the repository points here.  docs/kernels.md.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import InputError


def _graphs():
    return resources.files(__name__).joinpath("graphs")


def example_names() -> list[str]:
    """Names of the bundled examples (file stems), sorted."""
    return sorted(p.name[: -len(".json")] for p in _graphs().iterdir() if p.name.endswith(".json"))


def example_path(name: str) -> Path:
    """The file of the bundled example ``name`` (``fa_fwd_fig1`` or ``fa_fwd_fig1.json``).

    Raises InputError naming the known examples when there is none by that name.
    """
    stem = name[: -len(".json")] if name.endswith(".json") else name
    names = example_names()
    if stem not in names:
        raise InputError(f"unknown example '{name}': bundled examples are {', '.join(names)}")
    return Path(str(_graphs().joinpath(stem + ".json")))


def load_example(name: str):
    """The bundled example ``name`` as a validated Graph."""
    from ..model import load_graph

    return load_graph(example_path(name))
