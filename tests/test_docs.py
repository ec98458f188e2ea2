"""The README and the references in ``docs/`` hold: the README's two quick-start commands are
the ones CI runs, every link leads to a file and a heading that exist, every page says what
it covers, and every excerpt of code or printed output is what the code runs and prints.

The excerpts of the examples' output are checked where the examples run
(``tests/test_examples.py``)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

from vmstack import get_ancestors
from vmstack.cli import main
from vmstack.conformance import LayerConformance, memory_vm
from vmstack.wrappers import PassThroughVM

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: The page of a full ``vmstack bench`` run, written from a run of its own.
BENCHMARKS_PAGE = DOCS / "benchmarks.md"

#: The README's two quick-start commands, exactly: the first runs the main job, the second
#: the tests (``.ci/run`` runs the same install and test command from a clean clone).
MAIN_JOB = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && vmstack simulate"
TESTS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,plot]' && "
    "python -m pytest -q"
)

#: A fenced block: its info string and its text.
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
#: A Markdown link or image: its target, without a title.
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    """Every Markdown page the project's readers are sent to."""
    return [README, ROOT / "ARCHITECTURE.md", ROOT / "SECURITY.md", *sorted(DOCS.glob("*.md"))]


def _section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a whole heading line, ``#`` marks included) up to the next
    heading of its level or above."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n") + 1
    level = len(heading) - len(heading.lstrip("#"))
    ends = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE)
    following = ends.search(text, start + len(heading))
    return text[start : following.start() if following else len(text)]


def _blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of ``text`` outside code: each block's info string and text."""
    return [(match.group(1), match.group(2)) for match in _FENCE.finditer(text)]


def _code_and_output(path: Path, heading: str, index: int = 0) -> tuple[str, str]:
    """The ``index``-th Python block under ``heading`` and the plain block right after it,
    the output it prints."""
    blocks = _blocks(_section(path, heading))
    pythons = [n for n, (info, _) in enumerate(blocks) if info == "python"]
    at = pythons[index]
    assert blocks[at + 1][0] == "", f"{path.name}, {heading}: no output after the code"
    return blocks[at][1], blocks[at + 1][1]


def _run(code: str, name: str, namespace: dict[str, object] | None = None) -> str:
    """What ``code`` prints, run as a script."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, name, "exec"), {"__name__": "__main__", **(namespace or {})})
    return printed.getvalue()


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#+ ", line)}


def _links(path: Path) -> list[str]:
    """The local link targets of a page, code blocks and inline code left out."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return [
        target
        for target in _LINK.findall(text)
        if not re.match(r"[a-z]+:", target) or target.startswith("#")
    ]


def test_the_quick_start_has_the_two_commands_exactly() -> None:
    section = _section(README, "## Quick start")
    commands = [text.strip() for info, text in _blocks(section) if info == "sh"]
    assert commands == [MAIN_JOB, TESTS]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pip install --quiet -e '.[test,plot]'" in ci
    assert "\npython -m pytest -q\n" in ci + "\n"


def test_the_readme_is_a_front_door() -> None:
    """About 300 lines: what vmstack is, the quick start, a tour, where to read on."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 330
    headings = re.findall(r"^## (.+)$", _FENCE.sub("", text), re.MULTILINE)
    assert headings == ["Quick start", "A tour", "Benchmarks", "Where to read on"]


def test_the_readme_sends_the_reader_to_every_reference() -> None:
    linked = set(_links(README))
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")} | {"docs/benchmarks.md"}
    for page in sorted(pages | {"ARCHITECTURE.md", "SECURITY.md", "fuzz/README.md"}):
        assert page in linked, f"the README does not link {page}"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda page: page.name)
def test_every_reference_has_a_title_and_says_what_it_covers(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ") and len(lines[0]) > 2, f"{page.name} has no title"
    assert lines[1] == "", f"{page.name}: a blank line after the title"
    first = lines[2:][: lines[2:].index("")]
    assert first and not first[0].startswith(("#", "```", "|", "- ")), (
        f"{page.name} does not open with a paragraph saying what it covers"
    )
    assert len(" ".join(first).split()) >= 20, f"{page.name}'s first paragraph is too short"


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.name)
def test_every_link_leads_to_a_file_and_a_heading(page: Path) -> None:
    for target in _links(page):
        path, _, anchor = target.partition("#")
        goes_to = (page.parent / path).resolve() if path else page
        if goes_to == BENCHMARKS_PAGE and not goes_to.exists():
            continue  # test_the_benchmarks_page_is_there says why
        assert goes_to.exists(), f"{page.name} links {target}, which does not exist"
        if anchor:
            assert goes_to.suffix == ".md", f"{page.name}: an anchor into {path}"
            assert anchor in _anchors(goes_to), f"{page.name} links {target}: no such heading"


def test_the_benchmarks_page_is_there() -> None:
    if not BENCHMARKS_PAGE.exists():
        pytest.skip("docs/benchmarks.md is written from a run of `vmstack bench`; absent here")
    assert BENCHMARKS_PAGE.read_text(encoding="utf-8").startswith("# ")


@pytest.mark.slow
def test_the_readmes_stack_excerpt_prints_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedding excerpt builds a stack over LMDB, reads it back, and accepts a block
    carrying one transfer, printing exactly the lines shown under it."""
    monkeypatch.chdir(tmp_path)
    code, output = _code_and_output(README, "### Embedding a stack")
    assert _run(code, "README.md") == output


def test_the_stack_pages_excerpt_prints_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = _code_and_output(DOCS / "stack.md", "## The layers")
    assert _run(code, "docs/stack.md") == output


#: The line by which an excerpt of a run's printout says tables were left out there.
ELISION = "…"


def _comparable(lines: list[str]) -> list[str]:
    """A network run's printout without what differs from run to run or by engine: the
    progress bar, the measured rows, the engine's name in the headline and where its
    actors ran."""
    kept = []
    for line in lines:
        if line.startswith(("nodes caught up", "placement: ")) or "(measured)" in line:
            continue
        kept.append(re.sub(r"; engine: [^;]*;", "; engine: -;", line.rstrip()))
    return kept


def _check_network_excerpt(command: str, excerpt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``command`` (a ``vmstack simulate --nodes`` command), run on the local engine, prints
    ``excerpt`` but for the measured lines: a run's simulated figures are the same on
    every engine."""
    options = shlex.split(command)[2:]
    if "--engine" in options:
        options[options.index("--engine") + 1] = "local"
    capsys.readouterr()
    assert main(["simulate", *options]) == 0
    printed = _comparable(capsys.readouterr().out.splitlines())
    shown = _comparable(excerpt.splitlines())
    if ELISION not in shown:
        assert shown == printed
        return
    # An excerpt that leaves tables out: each run of shown lines stands, whole and in order,
    # in the printout, the first at its start and the last at its end.
    runs = "\n".join(shown).split(f"\n{ELISION}\n")
    at = 0
    for number, run in enumerate(runs):
        lines = run.splitlines()
        found = next(
            (i for i in range(at, len(printed) + 1) if printed[i : i + len(lines)] == lines), None
        )
        assert found is not None, f"not printed in this order: {lines[0]!r}"
        assert number > 0 or found == 0, "the excerpt does not start where the printout does"
        at = found + len(lines)
    assert at == len(printed), "the excerpt does not end where the printout does"


@pytest.mark.slow
def test_the_readmes_network_run_is_what_its_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    section = _section(README, "### A network run")
    match = re.search(r"The report of `(vmstack simulate --nodes [^`]+)`", section)
    assert match is not None, "the tour's network run names no command"
    report, _ = [text for language, text in _blocks(section) if language == ""]
    _check_network_excerpt(" ".join(match.group(1).split()), report, capsys)


def test_the_readmes_partition_figures_are_the_consensus_pages_run() -> None:
    """The tour's lines of the 64-node partition run are lines of the run shown whole in
    docs/network-consensus.md (whose form a test checks against the command's printout),
    under the same command."""
    section = _section(README, "### A network run")
    _, partition = [text for language, text in _blocks(section) if language == ""]
    page = (DOCS / "network-consensus.md").read_text(encoding="utf-8")
    command = "vmstack simulate --nodes 64 --partition 0.3@10-60"
    assert f"`{command}`" in section and f"`{command} --json run.json`" in page
    whole = page[page.index(f"`{command} --json run.json`") :]
    shown = next(text for language, text in _blocks(whole) if language == "").splitlines()
    assert partition.splitlines() and all(line in shown for line in partition.splitlines())


@pytest.mark.slow
def test_the_network_runs_excerpt_is_what_its_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/network-runs.md's Ray run, run on the local engine, prints the same but for
    the measured lines."""
    match = re.search(
        r"A real excerpt \(`(vmstack simulate --nodes [^`]+)`.*?\n```\n(.*?)\n```",
        (DOCS / "network-runs.md").read_text(encoding="utf-8"),
        re.DOTALL,
    )
    assert match is not None, "docs/network-runs.md has no network excerpt"
    _check_network_excerpt(" ".join(match.group(1).split()), match.group(2), capsys)


def _counting_layer(path: Path, heading: str) -> str:
    return next(
        text for info, text in _blocks(_section(path, heading)) if "class CountingVM" in text
    )


def test_the_counting_layer_excerpts_count_calls() -> None:
    """The README's and docs/kits.md's ten-line layer are one, and it counts as the example
    says: a batched request of 100 blocks is one call, the fallback one call per block."""
    code = _counting_layer(README, "### A new layer, proved by the kit")
    assert code == _counting_layer(DOCS / "kits.md", "## A pass-through layer")
    example = (ROOT / "examples" / "write_a_layer.py").read_text(encoding="utf-8")
    written = example[example.index("class CountingVM") :]
    written = written[: written.index("return forward(*args)\n") + len("return forward(*args)")]
    assert len(written.splitlines()) == 10, "the example's layer is no longer ten lines"
    assert len([line for line in code.splitlines() if line.strip()]) == 7
    namespace: dict[str, object] = {"Counter": Counter, "PassThroughVM": PassThroughVM}
    exec(compile(code, "README.md", "exec"), namespace)
    counting = namespace["CountingVM"]
    assert isinstance(counting, type)
    batching = counting(memory_vm(batching=True, blocks=150))
    get_ancestors(batching, batching.inner.last_accepted(), max_blocks_num=100)
    assert batching.counts == Counter({"get_ancestors": 1})
    serial = counting(memory_vm(batching=False, blocks=150))
    get_ancestors(serial, serial.inner.last_accepted(), max_blocks_num=100)
    assert serial.counts == Counter({"get_block": 100})


def test_the_readmes_kit_excerpt_is_a_kit_test_class() -> None:
    section = _section(README, "### A new layer, proved by the kit")
    [code] = [text for info, text in _blocks(section) if "LayerConformance)" in text]
    layer = _counting_layer(README, "### A new layer, proved by the kit")
    namespace: dict[str, object] = {"Counter": Counter, "PassThroughVM": PassThroughVM}
    exec(compile(layer + code, "README.md", "exec"), namespace)
    test_class = namespace["TestCountingVM"]
    assert isinstance(test_class, type) and issubclass(test_class, LayerConformance)
    inner = memory_vm(batching=True, blocks=3)
    assert type(test_class().wrap(inner)).__name__ == "CountingVM"


def test_the_consensus_example_decides_between_two_blocks() -> None:
    """docs/consensus.md's example: ten lines; blue wins, red is rejected, after 20
    successful polls, as its comment says."""
    section = _section(DOCS / "consensus.md", "## Deciding between two blocks")
    [code] = [text for info, text in _blocks(section) if info == "python"]
    assert len([line for line in code.splitlines() if line.strip()]) == 10
    assert _run(code, "docs/consensus.md") == "rejected accepted 20\n"
    assert "# rejected accepted 20" in code


@pytest.mark.slow
def test_the_plugin_excerpt_drives_the_plugin_as_a_node_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's plugin excerpt starts `vmstack plugin` as a node does, initializes it,
    accepts a block and reads the served stack back, printing the lines shown (the port
    aside)."""
    monkeypatch.chdir(tmp_path)
    code, output = _code_and_output(README, "### The C-chain VM as an avalanchego plugin")

    def masked(text: str) -> str:
        return re.sub(r"VMClient\(127\.0\.0\.1:\d+\) *", "VMClient(127.0.0.1:PORT) ", text)

    assert masked(_run(code, "README.md")) == masked(output)


def test_the_layout_is_drawn_once() -> None:
    """ARCHITECTURE.md, section 1, draws the layout; no other page draws it again."""
    for page in _pages():
        drawings = [text for _, text in _blocks(page.read_text(encoding="utf-8"))]
        drawn = [text for text in drawings if text.startswith("vmstack/\n")]
        expected = 1 if page.name == "ARCHITECTURE.md" else 0
        assert len(drawn) == expected, f"{page.name} draws the package's layout {len(drawn)}x"
