"""The README's Snowman consensus example is real: it runs as printed and prints what its
comment says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Snowman consensus") :]
    section = section[: section.index("\n## ", 1)]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the section has no Python example"
    return match.group(1)


def test_the_example_decides_between_two_blocks() -> None:
    """Ten lines of code; blue wins, red is rejected, after 20 successful polls."""
    code = _example()
    assert len([line for line in code.splitlines() if line.strip()]) == 10
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue() == "rejected accepted 20\n"
    assert "# rejected accepted 20" in code


def test_the_section_links_the_reference() -> None:
    """The section points to docs/consensus.md, which exists."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Snowman consensus") :]
    assert "(docs/consensus.md)" in section[: section.index("\n## ", 1)]
    assert (README.parent / "docs" / "consensus.md").is_file()
