"""Sphinx configuration of jacacc's documentation site (``make docs``).

Markdown pages (MyST), numpydoc docstrings, the PyData theme; the API reference
is generated from the package itself: every public module (no leading
underscore anywhere in its dotted name) found by walking ``jacacc``'s packages
gets a page (``api/modules/``), and every name in a package's ``__all__`` a page
of its own through ``sphinx.ext.autosummary`` (``api/generated/``).  Nothing
here lists a module by hand, so renamed or new modules appear by themselves.
The build needs no network: no intersphinx, no remote assets.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import jacacc  # noqa: E402

project = "jacacc"
author = "the jacacc authors"
copyright = "jacacc authors"
release = version = jacacc.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# MyST: `{py:func}` roles, ::: fences, heading anchors for [text](page.md#heading) links
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc / autosummary / numpydoc
autosummary_generate = True
autosummary_ignore_module_all = False
autodoc_member_order = "bysource"
numpydoc_show_class_members = False  # autoclass :members: documents the methods in place
numpydoc_class_members_toctree = False

# signatures without annotations, as NumPy's and SciPy's references show them: the numpydoc
# Parameters/Returns sections carry the types; annotations in signatures would double them, and
# their short names (Expr, Schedule: defined in several modules) resolve to no single target
autodoc_typehints = "none"

html_theme = "pydata_sphinx_theme"
html_title = f"jacacc {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    # the sidebar shows the current section's pages only: with ~300 API pages the fully expanded
    # navigation is most of the build's write time
    "collapse_navigation": True,
    "navigation_depth": 2,
}
# the pages of single names (api/generated/, reached from their module's page) have no navigation
# sidebar: rendering the site's toctree into each of them was a third of the build
html_sidebars = {"api/generated/*": []}
html_static_path: list[str] = []
html_show_sourcelink = True


# --------------------------------------------------------------------------- the API pages
API = os.path.join(DOCS, "api")
MODULES = os.path.join(API, "modules")
GENERATED = os.path.join(API, "generated")


def public_modules(package: str = "jacacc") -> list[str]:
    """Every public module under ``package`` (no part of its dotted name starts with ``_``), sorted."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, package + ".", onerror=lambda name: None):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def _import(modname: str):
    """The module, or None when it does not import (autodoc then reports the error in the build)."""
    try:
        return importlib.import_module(modname)
    except Exception:  # noqa: BLE001 - any import error is the build's to report
        return None


def exported(module) -> list[str]:
    """The names a package exports: its ``__all__``, else its public functions and classes."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [k for k, v in vars(module).items() if not k.startswith("_")
                 and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == module.__name__]
    return list(names)


def shadowed(modname: str) -> bool:
    """True when the parent package's attribute of this name is not this module (``jacacc.tensor.trace``
    is a function as well as a module): the function keeps the index entry, and the module's page
    documents its members one by one so that they are still indexed."""
    parent, _, leaf = modname.rpartition(".")
    module = _import(parent) if parent else None
    value = getattr(module, leaf, None)
    return value is not None and not inspect.ismodule(value)


def homes(packages: list[str]) -> dict[int, str]:
    """``id(object) -> "package.name"`` for every function and class a package exports: the
    shallowest package that exports it (then the first alphabetically) gets its page, the other
    packages link there (two pages of one class would be two descriptions of its canonical name)."""
    found: dict[int, str] = {}
    for modname in sorted(packages, key=lambda m: (m.count("."), m)):
        module = _import(modname)
        for name in exported(module) if module is not None else []:
            value = getattr(module, name, None)
            if (inspect.isfunction(value) or inspect.isclass(value)) and id(value) not in found:
                found[id(value)] = f"{modname}.{name}"
    return found


def _own_members(module) -> list[tuple[str, str]]:
    """(directive, name) for a module's public functions and classes, as autodoc's ``:members:`` picks them."""
    names = getattr(module, "__all__", None)
    out = []
    for name, value in vars(module).items():
        if name.startswith("_") or (names is not None and name not in names):
            continue
        if names is None and getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value):
            out.append(("autoexception" if issubclass(value, BaseException) else "autoclass", name))
        elif inspect.isfunction(value):
            out.append(("autofunction", name))
    return out


def module_page(modname: str, children: list[str], home: dict[int, str]) -> tuple[str, set[str]]:
    """The page of one module and the autosummary stubs (``package.name``) it asks for."""
    module = _import(modname)
    is_package = module is not None and hasattr(module, "__path__")
    hidden = shadowed(modname)
    lines = [modname, "=" * len(modname), "", f".. automodule:: {modname}"]
    if not (is_package or hidden):
        lines += ["   :members:", "   :undoc-members:"]
    if hidden:
        lines += ["   :no-index:"]
    lines += [""]
    stubs: set[str] = set()
    if is_package:
        own, elsewhere = [], []
        for name in exported(module):
            value = getattr(module, name, None)
            where = home.get(id(value), f"{modname}.{name}")
            if where == f"{modname}.{name}":
                own.append(name)
            else:
                elsewhere.append(where)
        if own:
            lines += [".. rubric:: Public names", "", f".. currentmodule:: {modname}", "",
                      ".. autosummary::", "   :toctree: ../generated", ""]
            lines += [f"   {name}" for name in own] + [""]
            stubs |= {f"{modname}.{name}" for name in own}
        if elsewhere:
            lines += [".. rubric:: Also exported here", "", ".. autosummary::", ""]
            lines += [f"   ~{where}" for where in elsewhere] + [""]
    elif hidden and module is not None:
        lines += [f".. currentmodule:: {modname}", ""]
        for directive, name in _own_members(module):
            lines += [f".. {directive}:: {name}"]
            if directive != "autofunction":
                lines += ["   :members:"]
            lines += [""]
    if children:
        lines += [".. rubric:: Modules", "", ".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {child}" for child in children] + [""]
    return "\n".join(lines), stubs


def _write(path: str, text: str) -> None:
    """Write only what changed, so that an incremental build re-reads only changed pages."""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def generate_api_pages() -> None:
    """(Re)write ``api/modules/*.rst``; remove the pages and autosummary stubs of names that are gone."""
    os.makedirs(MODULES, exist_ok=True)
    modules = public_modules()
    children: dict[str, list[str]] = {name: [] for name in modules}
    for name in modules:
        parent = name.rpartition(".")[0]
        if parent in children:
            children[parent].append(name)
    home = homes([m for m in modules if hasattr(_import(m), "__path__")])
    stubs: set[str] = set()
    for name in modules:
        text, wanted = module_page(name, children[name], home)
        _write(os.path.join(MODULES, f"{name}.rst"), text)
        stubs |= wanted
    for stale in set(os.listdir(MODULES)) - {f"{name}.rst" for name in modules}:
        os.remove(os.path.join(MODULES, stale))
    if os.path.isdir(GENERATED):
        for stale in set(os.listdir(GENERATED)) - {f"{name}.rst" for name in stubs}:
            os.remove(os.path.join(GENERATED, stale))


generate_api_pages()


# --------------------------------------------------------------------------- build speed
def _numpydoc_with_one_template(app) -> None:
    """numpydoc builds a Jinja environment and compiles its docstring template for every
    docstring (a third of the read phase here); compile it once per builder instead.  numpydoc's
    ``setup(app, get_doc_object_=...)`` exposes exactly this hook; the function below is numpydoc's
    own ``get_doc_object`` with the template cached."""
    from jinja2 import FileSystemLoader
    from jinja2.sandbox import SandboxedEnvironment
    from numpydoc import docscrape_sphinx, numpydoc
    from sphinx.jinja2glue import BuiltinTemplateLoader

    templates: dict[int, object] = {}
    dirs = [os.path.join(os.path.dirname(docscrape_sphinx.__file__), "templates")]

    def get_doc_object(obj, what=None, doc=None, config=None, builder=None):
        config = {} if config is None else config
        if id(builder) not in templates:
            if builder is not None:
                loader = BuiltinTemplateLoader()
                loader.init(builder, dirs=dirs)
            else:
                loader = FileSystemLoader(dirs)
            templates[id(builder)] = SandboxedEnvironment(loader=loader).get_template("numpydoc_docstring.rst")
        config["template"] = templates[id(builder)]
        return docscrape_sphinx.get_doc_object_orig(
            obj, what=what, doc=doc, config=config, class_doc=docscrape_sphinx.SphinxClassDoc,
            func_doc=docscrape_sphinx.SphinxFunctionDoc, obj_doc=docscrape_sphinx.SphinxObjDoc)

    needed = ("get_doc_object", "get_doc_object_orig", "SphinxClassDoc", "SphinxFunctionDoc", "SphinxObjDoc")
    if all(hasattr(docscrape_sphinx, name) for name in needed) and \
            getattr(numpydoc, "get_doc_object", None) is docscrape_sphinx.get_doc_object:
        numpydoc.get_doc_object = get_doc_object  # else: another numpydoc, left as it is


def setup(app):
    _numpydoc_with_one_template(app)
