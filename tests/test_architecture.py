"""The package's shape, checked: the layer table of docs/architecture.md is the imports.

Reads every module of ``tvm_twill`` with ``ast`` (no import, no TVM needed),
collects its imports of other parts of the package and of third-party
packages (function-level lazy imports included), and compares them with the
table between ``<!-- layers -->`` and ``<!-- /layers -->`` in
docs/architecture.md: every import must be allowed there, and every allowed
import must be used, so the document cannot drift from the code.
"""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "tvm_twill"
THIRD_PARTY = {"tvm", "tvm_ffi", "z3", "pulp", "matplotlib", "numpy", "psutil"}
MAX_LINES = 600


def _part(rel: pathlib.Path) -> str:
    """The part of the package a module belongs to: its top-level module or subpackage."""
    parts = rel.with_suffix("").parts
    return "__init__" if parts == ("__init__",) else parts[0]


def _imports(path: pathlib.Path) -> tuple[set, set]:
    rel = path.relative_to(PKG)
    pkg = list(rel.parts[:-1])
    inside, outside = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - (node.level - 1)]
                full = base + (node.module.split(".") if node.module else [])
                if full:
                    inside.add(full[0])
                else:  # from . import a, b: submodules, or attributes of the package itself
                    for a in node.names:
                        is_module = (PKG / f"{a.name}.py").exists() or (PKG / a.name).is_dir()
                        inside.add(a.name if is_module else "__init__")
            elif node.module and node.module.split(".")[0] == "tvm_twill":
                rest = node.module.split(".")[1:]
                inside.add(rest[0] if rest else node.names[0].name)
            elif node.module:
                outside.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")
                if top[0] == "tvm_twill" and len(top) > 1:
                    inside.add(top[1])
                else:
                    outside.add(top[0])
    return inside, outside & THIRD_PARTY


def actual_layers() -> dict:
    """part -> (parts it imports, third-party packages it imports)."""
    out: dict = {}
    for path in sorted(PKG.rglob("*.py")):
        me = _part(path.relative_to(PKG))
        inside, outside = _imports(path)
        got = out.setdefault(me, (set(), set()))
        got[0].update(p for p in inside if p != me)
        got[1].update(outside)
    return out


def documented_layers() -> dict:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- layers -->(.*?)<!-- /layers -->", text, re.S)
    assert block, "docs/architecture.md lost its <!-- layers --> table"
    out = {}
    for line in block.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue

        def names(cell):
            cell = re.sub(r"\([^)]*\)", "", cell)  # parenthetical remarks are for the reader
            return {n.strip("` ") for n in cell.split(",") if n.strip("` ") and n.strip() != "-"}
        out[cells[0].strip("`").removesuffix("/")] = (names(cells[1]), names(cells[2]))
    return out


def test_layer_table_matches_the_imports():
    actual, documented = actual_layers(), documented_layers()
    assert set(actual) == set(documented), "parts of the package and rows of the table differ"
    for part, (inside, outside) in actual.items():
        doc_inside, doc_outside = documented[part]
        assert inside == doc_inside, f"{part}: imports {sorted(inside)}, the table says {sorted(doc_inside)}"
        assert outside == doc_outside, f"{part}: uses {sorted(outside)}, the table says {sorted(doc_outside)}"


def assert_acyclic(deps: dict) -> None:
    """AssertionError naming the first import circle of ``deps`` (name -> names it imports), if any."""
    state: dict = {}

    def visit(p, path):
        assert state.get(p) != "open", f"import circle: {' -> '.join(path[path.index(p):] + [p])}"
        if state.get(p) == "done":
            return
        state[p] = "open"
        for q in sorted(deps.get(p, ())):
            visit(q, path + [p])
        state[p] = "done"

    for p in sorted(deps):
        visit(p, [])


def test_layers_are_acyclic():
    assert_acyclic({p: inside for p, (inside, _) in actual_layers().items()})


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports() -> dict:
    """module -> the package's modules it imports (``tvm_twill.a.b``), at any depth: imports inside functions
    and under ``if TYPE_CHECKING`` count; ``from . import x`` names the submodule ``x`` when there is one."""
    mods = {_module_name(p): p for p in PKG.rglob("*.py")}
    out = {}
    for name, path in mods.items():
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = pkg[:len(pkg) - (node.level - 1)] if node.level else []
                full = ".".join(base + (node.module.split(".") if node.module else []))
                for a in node.names:
                    sub = f"{full}.{a.name}"
                    deps.add(sub if sub in mods else full)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        out[name] = {d for d in deps if d in mods and d != name}
    return out


def test_no_import_circle_file_to_file():
    """No module imports, through any chain, a module that imports it: inside a room too (a circle there
    splits into a shared lower module, as ``emulator/values.py`` holds the engine's step results)."""
    assert_acyclic(module_imports())


def test_only_frontend_ir_and_workloads_import_tvm():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        _, outside = _imports(path)
        if outside & {"tvm", "tvm_ffi"}:
            # emulator/launch.py runs a compiled module's host code; the emulator shares nothing with frontend/
            assert rel in ("frontend/ir.py", "workloads/__init__.py", "emulator/launch.py"), \
                f"{rel} imports TVM directly: go through frontend/ir.py"


def test_no_module_over_the_size_limit():
    long = {p.relative_to(PKG).as_posix(): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_reference_to_paths_outside_the_repository():
    pattern = re.compile(r"(\.\./shared|shared/(spec|seeds|notes))")
    tops = [ROOT / d for d in ("tvm_twill", "docs", "tests", "tutorials", "bench", "examples", "cmake", ".ci")]
    files = [ROOT / "README.md", ROOT / "pyproject.toml"] + [
        p for top in tops if top.exists() for p in top.rglob("*")
        if p.is_file() and p.suffix in (".py", ".md", ".toml", ".json", ".txt", "") and "__pycache__" not in p.parts]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if pattern.search(line) and p.name != "test_architecture.py"]
    assert not hits, f"references to files outside the repository: {hits}"


TEST_ROOMS = {"model", "solvers", "frontend", "transforms", "emulator", "api", "cli", "bench"}


def test_tests_are_arranged_like_the_package():
    """Tests live in a folder per room; the top level holds only shared helpers and this file."""
    tests = ROOT / "tests"
    rooms = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert rooms == TEST_ROOMS, f"tests/ folders {sorted(rooms)} != {sorted(TEST_ROOMS)} (docs/architecture.md, Where to add)"
    loose = sorted(p.name for p in tests.glob("test_*.py") if p.name != "test_architecture.py")
    assert not loose, f"test modules outside a room folder: {loose}"
    package_rooms = {p.name for p in (ROOT / "tvm_twill").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert {"model", "solvers", "frontend", "transforms", "emulator"} <= package_rooms
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("test_"):
                raise AssertionError(f"{path.relative_to(ROOT)} imports the test module {node.module}; "
                                     "move the shared piece to a helper at tests/ top level")


MAX_FUNCTION_LINES = 80
MAX_LONG_EXEMPTIONS = 3


def long_functions() -> dict:
    """``module.py:qualified.name`` -> lines, for every function of ``tvm_twill`` longer than MAX_FUNCTION_LINES.

    A function's length is ``end_lineno - lineno + 1`` (its decorators not counted, its nested functions counted).
    """
    out = {}

    def visit(node, rel, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                n = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and n > MAX_FUNCTION_LINES:
                    out[f"{rel}:{name}"] = n
                visit(child, rel, name + ".")
            else:
                visit(child, rel, prefix)

    for path in sorted(PKG.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(PKG).as_posix(), "")
    return out


def documented_long_functions() -> dict:
    """The exemptions listed between ``<!-- long-functions -->`` markers of docs/architecture.md: name -> reason."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- long-functions -->(.*?)<!-- /long-functions -->", text, re.S)
    assert block, "docs/architecture.md lost its <!-- long-functions --> list"
    out = {}
    for line in block.group(1).splitlines():
        m = re.match(r"\s*-\s+`([^`]+)`:\s*(.*\S)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_no_function_over_the_size_limit_but_the_documented_exemptions():
    long, exempt = long_functions(), documented_long_functions()
    assert len(exempt) <= MAX_LONG_EXEMPTIONS, f"more than {MAX_LONG_EXEMPTIONS} exemptions: {sorted(exempt)}"
    unlisted = {f: n for f, n in long.items() if f not in exempt}
    assert not unlisted, (f"functions over {MAX_FUNCTION_LINES} lines (split them by concern, or list one with its "
                          f"reason in docs/architecture.md): {unlisted}")
    stale = sorted(set(exempt) - set(long))
    assert not stale, f"docs/architecture.md exempts functions that are not over {MAX_FUNCTION_LINES} lines: {stale}"


if __name__ == "__main__":  # list the long functions: python tests/test_architecture.py
    for name, lines in sorted(long_functions().items(), key=lambda kv: -kv[1]):
        print(f"{lines:5d}  {name}")
