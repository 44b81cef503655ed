"""Sphinx configuration of rfa's documentation site (``make docs``).

Pages are Markdown (MyST) beside this file; the API reference (api/, reStructuredText) is generated from the
docstrings (Google style) by autodoc and napoleon, its module lists by docs/_ext/rfa_api.py. Nothing is fetched
from the network: no intersphinx, no CDN.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)  # rfa, experiments and configs from this checkout, installed or not
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))

import rfa  # noqa: E402  (after the path is set)

project = "rfa"
author = "rfa maintainers"
copyright = "the rfa maintainers"
release = rfa.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "rfa_api",  # docs/_ext/rfa_api.py: the API pages' module lists, the commands read without importing them
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# MyST: `$...$` stays literal text (the pages write formulas in Unicode), headings get anchors for links.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc: members in source order, each documented once, on the module that defines it.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"  # types for the arguments a docstring describes, no others
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_default_options = {"show-inheritance": True, "ignore-module-all": True}  # __all__ lists imported names too
# rfa annotates its signatures: there are no ``# type:`` comments to read, and looking for them re-parses the source
# of every documented function (a few percent of the build; the pages come out the same).
autodoc_use_type_comments = False

# napoleon: Google-style sections ("Args:", "Returns:", "Example:").
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # "Attributes:" as fields of the class, not as separate (duplicated) attribute entries
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"rfa {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
