"""PMLR Jekyll posts (``_posts/*.md``): one paper per file, its fields in YAML
front matter between ``---`` lines; title and abstract carry HTML and ``$``
math, which are cleaned."""

from __future__ import annotations

import re

import yaml

from rag.readers.base import RecordBuilder, clean_markup, str_field
from rag.readers.venues import container_venue, to_year
from rag.textio import split_lines


class _PostLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML that keeps scalars as strings (ids like ``8e10`` or ``no`` stay text)."""


_PostLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag == "tag:yaml.org,2002:null"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
PMLR_PAGE = "https://proceedings.mlr.press/v{volume}/{id}.html"


def _links(meta: dict) -> dict[str, str]:
    links: dict[str, str] = {}
    for key in ("pdf", "software", "supplementary", "video", "code"):
        v = str_field(meta, key)
        if v:
            links[key] = v
    openreview = str_field(meta, "openreview")
    if openreview:
        links["openreview"] = (
            openreview
            if openreview.startswith("http")
            else f"https://openreview.net/forum?id={openreview}"
        )
    for extra in meta.get("extras") or []:
        if isinstance(extra, dict) and extra.get("label") and extra.get("link"):
            links.setdefault(str(extra["label"]).strip().lower(), str(extra["link"]).strip())
    return links


def _year(meta: dict) -> int | None:
    issued = meta.get("issued")
    parts = issued.get("date-parts") if isinstance(issued, dict) else None
    return (
        to_year(meta.get("year"))
        or to_year(meta.get("date"))
        or (
            to_year(parts[0][0])
            if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]
            else None
        )
    )


class PmlrPostReader:
    extensions = (".md", ".markdown")

    def read(self, text: str, out: RecordBuilder) -> None:
        lines = split_lines(text)
        if not lines or lines[0].strip() != "---":
            out.error(1, "no YAML front matter (a post must start with a '---' line)")
            return
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is None:
            out.error(1, "YAML front matter is not closed by a '---' line")
            return
        try:
            meta = yaml.load("\n".join(lines[1:end]), Loader=_PostLoader)  # noqa: S506 - safe
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
            line = mark.line + 2 if mark is not None else 1  # +1 for 1-based, +1 for the '---'
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            out.error(line, f"bad YAML front matter: {problem}")
            return
        if not isinstance(meta, dict):
            out.error(2, "YAML front matter is not a mapping of fields")
            return
        abs_line = next((i + 1 for i in range(1, end) if lines[i].startswith("abstract:")), 1)
        pid = str_field(meta, "id")
        volume = str_field(meta, "volume")
        links = _links(meta)
        if not volume:
            m = re.search(r"(?:mlr\.press|mlresearch)/v(\d+)/", links.get("pdf", ""))
            volume = m.group(1) if m else None
        url = str_field(meta, "url")
        if not url and pid and volume:
            url = PMLR_PAGE.format(volume=volume, id=pid)
        url = url or links.get("openreview") or links.get("pdf")
        container = " ".join(
            s for s in (str_field(meta, "container-title"), str_field(meta, "booktitle")) if s
        ).lower()
        venue = (
            str_field(meta, "venue") or container_venue(container) or ("PMLR" if volume else None)
        )
        out.add(
            ordinal=1,
            line=abs_line,
            abstract=meta.get("abstract"),
            title=str_field(meta, "title"),
            authors=meta.get("author", meta.get("authors")),
            url=url,
            own_id=pid,
            venue=venue,
            year=_year(meta),
            links=links,
            clean=clean_markup,
            pages=_pages(meta),
        )


def _pages(meta: dict) -> str | None:
    """PMLR's page range: its ``page`` field, else ``firstpage``-``lastpage``."""
    page = str_field(meta, "page")
    if page:
        return page
    first, last = meta.get("firstpage"), meta.get("lastpage")
    return f"{first}-{last}" if first not in (None, "") and last not in (None, "") else None
