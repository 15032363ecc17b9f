"""Sphinx configuration for the rocketpy documentation.

Build (from the repository root)::

    python3 -m sphinx -W --keep-going -b html docs docs/_build/html

Needs the ``docs`` extra (Sphinx and myst-parser). No network access: the theme is Sphinx's
bundled alabaster and there is no intersphinx.
"""
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Document the checkout these docs belong to, even when another rocketpy is installed.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

project = "rocketpy"
author = "the rocketpy authors"
copyright = "the rocketpy authors; Apache RocketMQ is a trademark of the Apache Software Foundation"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "rocketpy_sphinx",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "_static", "Thumbs.db", ".DS_Store"]
templates_path = []

# MyST: GitHub-style anchors for headings down to level 3, so [x](protocol.md#frames) resolves.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist"]

# autodoc: members in source order; type hints in the description, not the signature line.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {}
# Optional heavy dependencies of the capture/Spark code: never needed to read docstrings.
autodoc_mock_imports = ["pyspark", "pyarrow", "pandas", "matplotlib"]
# viewcode: link an object's source only from the module that documents it. Following imports
# would file re-exported names (frame.py re-exports layout.py's) under the re-exporting module
# and write "[docs]" links to anchors that do not exist (tests/test_docs.py checks every link).
viewcode_follow_imported_members = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "alabaster"
html_title = "rocketpy"
html_static_path = ["_static"]
html_css_files = ["rocketpy.css"]
html_theme_options = {
    "description": "RocketMQ NameServer and remoting protocol in Python on Twisted",
    "fixed_sidebar": True,
    "page_width": "1180px",
    "sidebar_width": "230px",
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
