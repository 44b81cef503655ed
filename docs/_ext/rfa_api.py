"""The API reference's directives, so that its pages follow the code without a list of modules to keep by hand.

``.. package-modules:: rfa.attention`` documents a package: its docstring, a table of the names it gathers
(``__all__``), then a section per public module, recursively (names starting with ``_`` are skipped;
``:exclude:`` skips subpackages that have a page of their own). A module's members are documented by
``automodule :members:``, which takes each name in the module that defines it, so nothing is described twice;
a package's ``__init__`` only gathers names, so a subpackage shows its docstring.

Two kinds of modules are read from their source instead of imported. The command lines define their absl
flags when imported and several define the same flag (``--config``, ``--workdir``), so one process cannot
import them all, as autodoc would: a command shows how to run it, its docstring and its flags (a command package,
a benchmark, its ``__init__``'s docstring and its ``__main__.py``'s flags). The config
files (modules with a top-level ``get_config``) show how to name them. The docstrings of both are help text
laid out for a terminal, and are shown as written, with their inline markup (````x````, ``:mod:`x```) read as
the plain text it marks.

``.. exported-names:: rfa`` is the table of a package's ``__all__``, each name linked to its documentation.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pathlib
import pkgutil
import re
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective, switch_source_input
from sphinx.util.nodes import nested_parse_with_titles


def _source(module: str) -> pathlib.Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"module {module!r} not found")
    return pathlib.Path(spec.origin)


def _tree(module: str) -> ast.Module:
    return ast.parse(_source(module).read_text(encoding="utf-8"))


def _flags(tree: ast.Module) -> list[tuple[str, str, str]]:
    """``(name, default, help)`` of each ``*.DEFINE_*("name", default, "help")`` call in a module."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if not node.func.attr.startswith("DEFINE_") or len(node.args) < 3:
            continue
        name, default, help_text = node.args[:3]
        if isinstance(name, ast.Constant) and isinstance(help_text, ast.Constant):
            found.append((name.value, ast.unparse(default), str(help_text.value)))
    return found


def _is_config(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == "get_config" for node in tree.body)


def _modules(package: str, exclude: set[str]) -> list[str]:
    """``package`` and its public modules, recursively: modules first, then subpackages, alphabetically."""
    found = [package]
    path = _source(package)
    if path.name != "__init__.py":
        return found
    for info in sorted(pkgutil.iter_modules([str(path.parent)]), key=lambda i: (i.ispkg, i.name)):
        name = f"{package}.{info.name}"
        if not info.name.startswith("_") and name not in exclude:
            found += _modules(name, exclude) if info.ispkg else [name]
    return found


def _plain(text: str) -> str:
    """``text`` without reStructuredText's inline markup: roles (``:mod:`x```, ``:func:`~a.b```) and literals."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return re.sub(r"``(.+?)``", r"\1", text)


def _help_text(tree: ast.Module, usage: str) -> list[str]:
    """The usage line, then the module docstring as written (a literal block, inline markup removed)."""
    text = _plain(inspect.cleandoc(ast.get_docstring(tree, clean=False) or ""))
    lines = [f"``{usage}``", ""]
    if text:
        lines += ["::", ""] + [f"   {line}".rstrip() for line in text.splitlines()] + [""]
    return lines


def _command_lines(module: str, tree: ast.Module, flags_tree: ast.Module | None = None) -> list[str]:
    """A command's section: its usage and docstring (``tree``'s), then its flags (``flags_tree``'s, default
    ``tree``'s: a package's flags are its ``__main__.py``'s)."""
    lines = _help_text(tree, f"python -m {module}")
    flags = _flags(tree if flags_tree is None else flags_tree)
    if flags:
        lines += [".. rubric:: Flags", ""]
        for name, default, help_text in flags:
            lines += [f"``--{name}`` (default ``{default}``)", f"   {_plain(help_text)}", ""]
    return lines


def _module_lines(module: str) -> list[str]:
    """A module's section: its title and what documents it."""
    title = f"``{module}``"
    lines = [title, "-" * len(title), ""]
    tree = _tree(module)
    main = _source(module).with_name("__main__.py") if _source(module).name == "__init__.py" else None
    main_tree = ast.parse(main.read_text(encoding="utf-8")) if main is not None and main.exists() else None
    if _flags(tree):
        lines += _command_lines(module, tree)
    elif main_tree is not None and _flags(main_tree):  # a command package (a benchmark): its flags in __main__.py
        lines += _command_lines(module, tree, main_tree)
    elif _is_config(tree):
        lines += _help_text(tree, f"--config {module.replace('.', '/')}.py")
    elif _source(module).name == "__init__.py":
        lines += [f".. automodule:: {module}"]
    else:
        lines += [f".. automodule:: {module}", "   :members:"]
    return [*lines, ""]


def _data_definition(package, name: str) -> tuple[str, str]:
    """The module of ``package`` that assigns ``name`` at its top level, and the comment ending that line."""
    for module in _modules(package.__name__, set()):
        source = _source(module).read_text(encoding="utf-8")
        for node in ast.parse(source).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return module, source.splitlines()[node.lineno - 1].partition("  # ")[2].strip()
    return package.__name__, ""


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").split("\n\n")[0].split())


def _describe(package, name: str) -> tuple[str, str, str]:
    """``(target, role, summary)`` of a name a package exports: where it is documented, and what it is."""
    value = getattr(package, name)
    if inspect.ismodule(value):
        return value.__name__, "mod", _first_paragraph(inspect.getdoc(value))
    if inspect.isclass(value) or inspect.isroutine(value):
        target = f"{value.__module__}.{value.__qualname__}"
        if value.__name__ != name:  # an alias: an old name kept for a release
            return target, "obj", f"an alias of ``{package.__name__}.{value.__name__}``"
        return target, "obj", _first_paragraph(inspect.getdoc(value))
    module, comment = _data_definition(package, name)
    return f"{module}.{name}", "data", comment or f"a {type(value).__name__}"


def _names_lines(package: str) -> list[str]:
    """A table of the names in ``package.__all__``, each linked to its documentation, with its summary."""
    module = importlib.import_module(package)
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 30 70", "", "   * - name", "     - what it is"]
    for name in module.__all__:
        target, role, summary = _describe(module, name)
        lines += [f"   * - :py:{role}:`{package}.{name} <{target}>`", f"     - {summary}"]
    return [*lines, ""]


class _Rst(SphinxDirective):
    """A directive that writes reStructuredText and parses it in place (section titles allowed), in a Markdown page
    too: MyST parses a directive's content as Markdown, where reStructuredText shows as its literal text."""

    def parse(self, lines: list[str]) -> list[nodes.Node]:
        if str(self.env.doc2path(self.env.docname)).endswith(".md"):
            lines = ["```{eval-rst}", *lines, "```"]
        content, node = StringList(lines, source=self.get_source_info()[0]), nodes.container()
        with switch_source_input(self.state, content):
            nested_parse_with_titles(self.state, content, node)
        return node.children


class PackageModulesDirective(_Rst):
    required_arguments = 1
    option_spec: ClassVar[dict] = {"exclude": directives.unchanged}

    def run(self):
        package = self.arguments[0]
        lines = [f".. automodule:: {package}", ""]
        if getattr(importlib.import_module(package), "__all__", None):
            lines += ["Names", "-----", "", f"``{package}`` gathers these names:", "", *_names_lines(package)]
        for module in _modules(package, set(self.options.get("exclude", "").split()))[1:]:
            self.env.note_dependency(str(_source(module)))
            lines += _module_lines(module)
        return self.parse(lines)


class AttentionVariantsDirective(_Rst):
    """The table of ``rfa.train.ATTENTION_VARIANTS``, from the registry itself: every variant a config string
    names, with the attention fields it sets."""

    def run(self):
        from rfa.train import ATTENTION_VARIANTS

        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 25 75", "", "   * - variant", "     - fields"]
        for name, fields in ATTENTION_VARIANTS.items():
            shown = ", ".join(f"``{field}={value!r}``" for field, value in fields.items())
            lines += [f"   * - ``{name}``", f"     - {shown}"]
        return self.parse([*lines, ""])


class ExportedNamesDirective(_Rst):
    required_arguments = 1

    def run(self):
        return self.parse(_names_lines(self.arguments[0]))


def _every_document(app, env, added, changed, removed) -> list[str]:
    """Every page is read again on every build: Sphinx reports a page's warnings only when it reads the page, so
    an incremental build after a failed one would pass (``-W``) without reading the pages that warned."""
    return sorted(env.found_docs - set(added) - set(changed) - set(removed))


def _constructor_signature(app, what, name, obj, options, signature, return_annotation):
    """A Flax NNX module's signature from its ``__init__``: ``nnx.Module``'s metaclass defines ``__call__(*args,
    **kwargs)``, which autodoc would otherwise show for every NNX class."""
    if what != "class" or signature != "(*args, **kwargs)":
        return None
    init = next(c.__init__ for c in obj.__mro__ if "__init__" in vars(c))  # the constructor the class inherits
    if init is object.__init__:
        return "()", return_annotation
    parameters = list(inspect.signature(init).parameters.values())[1:]  # without self
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]  # types: in the description
    return str(inspect.Signature(plain)), return_annotation


def setup(app):
    app.connect("env-get-outdated", _every_document)
    app.connect("autodoc-process-signature", _constructor_signature)
    app.add_directive("package-modules", PackageModulesDirective)
    app.add_directive("exported-names", ExportedNamesDirective)
    app.add_directive("attention-variants", AttentionVariantsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
