"""The documentation site: the Sphinx build (warnings are errors), its API pages, and the
command-line transcripts of the pages, run and compared with what they show.

The pages' ``>>>`` examples are doctests of their own (``--doctest-glob=docs/*.md`` in
pyproject.toml); this module checks what doctest cannot.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)

#: names whose API page must exist: the entry points of each system
MAIN_NAMES = [
    "jacacc.optimize", "jacacc.trace", "jacacc.compile", "jacacc.from_jax", "jacacc.Plan", "jacacc.CompGraph",
    "jacacc.tensor.hessian", "jacacc.tensor.grad", "jacacc.linalg.potrf", "jacacc.linalg.syevd",
    "jacacc.iverson.compile", "jacacc.iverson.grad", "jacacc.elementwise.define", "jacacc.problems.get",
    "jacacc.sweep.run",
]


def public_modules() -> list[str]:
    import importlib
    import pkgutil

    jacacc = importlib.import_module("jacacc")
    return ["jacacc"] + [m.name for m in pkgutil.walk_packages(jacacc.__path__, "jacacc.")
                         if not any(part.startswith("_") for part in m.name.split("."))]


@pytest.mark.scripts  # half a minute of Sphinx: `make test-extra`
def test_site_builds(tmp_path):
    """The site builds as ``make docs`` builds it (-W: a warning fails), with a page per Markdown
    page, an API page per main name and per public module, and the pages' figures.

    One test on purpose: under pytest-xdist a fixture shared by several tests would build the site
    once per worker, and two builds at once would both write the generated API sources."""
    for extension in ("sphinx", "myst_parser", "numpydoc", "pydata_sphinx_theme"):
        pytest.importorskip(extension)
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-j", "1", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    site = tmp_path / "html"

    # every Markdown page became an HTML page (an orphan would have failed the -W build)
    assert [p for p in PAGES if not (site / p.relative_to(DOCS).with_suffix(".html")).is_file()] == []
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "guide/graph-elimination.html" in index and "api/index.html" in index

    # the main names' pages, each describing its name
    for name in MAIN_NAMES:
        page = site / "api" / "generated" / f"{name}.html"
        assert page.is_file(), name
        assert f'id="{name}"' in page.read_text(encoding="utf-8"), name

    # a page per public module, discovered from the package; none for private ones
    modules = public_modules()
    assert [m for m in modules if not (site / "api" / "modules" / f"{m}.html").is_file()] == []
    assert not list((site / "api" / "modules").glob("*._*.html"))

    # every figure a page links exists and is copied into the site
    for page in PAGES:
        for figure in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / figure).resolve().is_file(), (page, figure)
            assert (site / "_images" / Path(figure).name).is_file(), (page, figure)


# ----------------------------------------------------------------------------- transcripts
def transcripts() -> list[tuple[str, str, int, str]]:
    """(page:line, command, expected exit status, expected output) of every ``$ jacacc`` line in a
    ```console block of the pages."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.finditer(r"^```console\n(.*?)^```", text, flags=re.M | re.S):
            first = text.count("\n", 0, block.start(1)) + 1
            lines = block.group(1).splitlines()
            starts = [i for i, line in enumerate(lines) if line.startswith("$ ")]
            for k, i in enumerate(starts):
                end = starts[k + 1] if k + 1 < len(starts) else len(lines)
                command, _, comment = lines[i][2:].partition("#")
                status = re.search(r"exit status (\d+)", comment)
                found.append((f"{page.relative_to(DOCS)}:{first + i}", command.strip(),
                              int(status.group(1)) if status else 0, "\n".join(lines[i + 1:end])))
    return found


TRANSCRIPTS = transcripts()


def test_the_pages_have_transcripts():
    assert any(command.startswith("jacacc optimize") for _, command, _, _ in TRANSCRIPTS)


@pytest.mark.parametrize("where, command, status, expected", TRANSCRIPTS, ids=[t[0] for t in TRANSCRIPTS])
def test_console_transcript(where, command, status, expected):
    """A ``$ jacacc …`` line prints what the page shows below it (stdout and stderr), from the
    repository root, with the exit status its ``# exit status N`` comment names (else 0)."""
    argv = shlex.split(command)
    assert argv[0] == "jacacc", f"{where}: only jacacc commands are run"
    done = subprocess.run([sys.executable, "-m", "jacacc", *argv[1:]], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, cwd=REPO)
    shown = [line.rstrip() for line in expected.strip("\n").splitlines()]
    printed = [line.rstrip() for line in done.stdout.strip("\n").splitlines()]
    assert printed == shown, f"{where}: {command}"
    assert done.returncode == status, f"{where}: {command}"


# ----------------------------------------------------------------------------- the README
def test_readme_links_exist():
    """The README is the front door: every relative link in it names a file of the repository."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = [target.split("#")[0] for target in re.findall(r"\]\(([^)#][^)]*)\)", text)
             if "://" not in target]
    assert links
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing
