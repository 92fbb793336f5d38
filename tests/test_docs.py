"""The README is a short guide and the docs hang together: every relative link resolves.

The README is what a newcomer reads first, so it stays short (what qrmd is, the two commands,
the shape of the system, where to go next) and starts with the two commands; the manual lives
in ``docs/`` as task guides. A guide that is moved or renamed, or a heading that changes,
would leave links pointing nowhere: every relative link of the README and of ``docs/*.md`` must
name a file that exists, and an anchor must name a heading of that file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
#: The README is a guide, not a manual (the manual is docs/).
README_MAX_LINES = 300

# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text without code: a ``[x](y)`` inside a code block or span is not a link."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings give (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        found.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return found


def relative_links(page: Path) -> list[str]:
    """The page's links to files of this repository (web addresses left out)."""
    targets = _LINK.findall(_prose(page.read_text()))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


LINKS = [(page, target) for page in PAGES for target in relative_links(page)]


def _link_id(link: tuple[Path, str]) -> str:
    page, target = link
    return f"{page.relative_to(ROOT)} links to {target}"


def test_the_readme_is_a_short_guide() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the detail to a "
        "guide in docs/ and link it"
    )


def test_the_readmes_first_commands_are_make_demo_and_make_test() -> None:
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    "))
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line.split("#")[0].strip())
    assert block[:2] == ["make demo", "make test"]


def test_the_pages_link_to_each_other() -> None:
    assert len(LINKS) >= 40


@pytest.mark.parametrize("link", LINKS, ids=[_link_id(link) for link in LINKS])
def test_every_relative_link_resolves(link: tuple[Path, str]) -> None:
    page, target = link
    path_part, _, anchor = target.partition("#")
    linked = (page.parent / path_part).resolve() if path_part else page
    assert linked.exists(), f"{page.relative_to(ROOT)}: {target}: no such file"
    if anchor and linked.suffix == ".md":
        assert anchor in anchors(linked), (
            f"{page.relative_to(ROOT)}: {target}: {linked.relative_to(ROOT)} has no heading "
            f"with the anchor #{anchor}"
        )


@pytest.mark.parametrize(
    "guide", sorted(DOCS.glob("*.md")), ids=lambda guide: f"the README links to {guide.name}"
)
def test_every_guide_is_reachable_from_the_readme(guide: Path) -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in relative_links(README)}
    assert guide.resolve() in linked, f"README.md's 'Where to go next' does not link {guide.name}"
