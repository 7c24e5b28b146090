"""Every Python example of docs/python.md and docs/agents.md runs as written: an example file shown
on a page must be that file, word for word (pytest runs the file itself, from examples/); any other
block runs here against a real memd, with MEMD_URL and MEMD_API_KEY set. A block that cannot run
is marked `<!-- no-run: reason -->` on the line before its fence, and must still compile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memd.testing import start_memd

REPO = Path(__file__).resolve().parents[3]
PAGES = ["docs/python.md", "docs/agents.md"]
FENCE = re.compile(r"^```(\w*)\s*$")
NO_RUN = re.compile(r"^<!--\s*no-run:(.*?)-->\s*$")


def blocks(page: str) -> list[tuple[int, str, str | None]]:
    """The ```python blocks of a page: (line, code, no-run reason)."""
    lines = (REPO / page).read_text().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        if m.group(1) == "python":
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            mark = NO_RUN.match(lines[k].strip()) if k >= 0 else None
            out.append((i + 1, "\n".join(lines[i + 1 : j]) + "\n", mark.group(1).strip() if mark else None))
        i = j + 1
    return out


EXAMPLES = [(page, line, code, why) for page in PAGES for line, code, why in blocks(page)]


@pytest.fixture(scope="module")
def server():
    with start_memd() as s:
        yield s


def test_the_pages_have_python_examples_that_run():
    for page in PAGES:
        assert any(why is None for p, _, _, why in EXAMPLES if p == page), page
    for page, line, _, why in EXAMPLES:
        assert why is None or why, f"{page}:{line}: a no-run mark needs its reason"


@pytest.mark.parametrize(("page", "line", "code", "why"), EXAMPLES, ids=[f"{p}:{n}" for p, n, _, _ in EXAMPLES])
def test_example(page, line, code, why, server, monkeypatch, tmp_path):
    compiled = compile(code, f"{page}:{line}", "exec")
    first = code.split("\n", 1)[0]
    if first.startswith("# clients/python/examples/"):
        shown = REPO / first[2:].strip()
        assert shown.read_text() == code, f"{page}:{line} differs from {shown}"
        return
    if why is not None:
        return
    monkeypatch.setenv("MEMD_URL", server.url)
    monkeypatch.setenv("MEMD_API_KEY", server.key)
    monkeypatch.chdir(tmp_path)
    exec(compiled, {"__name__": "__docs__"})
