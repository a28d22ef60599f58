"""pytest collects the documentation pages' examples (``--doctest-glob=docs/*.md``), not the
Sphinx configuration (importing it writes the API pages) nor the build output."""

collect_ignore = ["conf.py"]
collect_ignore_glob = ["_build/*", "api/*", "_templates/*"]
