"""Safe rendering of engine results for the Gradio UI.

This package and its modules own every string of HTML or
Markdown that the UI shows. Abstract text, titles, authors and model output
are untrusted: each piece is escaped there (``html.escape``, plus Markdown
escaping for chat messages) before any markup is added, so ``<script>`` or
``<img onerror=...>`` inside an abstract shows as text.
Nothing here calls the engine; it only formats rag.types.

The code lives in ``ui.render.base`` (escaping, links, highlighting),
``ui.render.chat`` (answers, citation cards), ``ui.render.compare`` (the
comparison table), ``ui.render.papers`` (explorer, lists, topic map, status)
and ``ui.render.assets`` (CSS and JS); every name is re-exported here.
"""

from __future__ import annotations

from ui.render.assets import (
    CSS,
    JS,
)
from ui.render.base import (
    content_words,
    esc,
    highlight,
    html_model_text,
    md_escape,
    md_model_text,
    paper_heading,
    paper_link,
    safe_url,
    strip_markers,
)
from ui.render.chat import (
    STOPPED_MARKDOWN,
    answer_markdown,
    citation_card,
    citations_panel,
    cite_link,
    error_markdown,
    error_panel,
    hit_card,
    mark_spans,
    match_words,
    md_with_links,
    relevance_words,
    sentence_markdown,
    stopped_panel,
    stream_markdown,
    support_words,
)
from ui.render.compare import (
    comparison_html,
)
from ui.render.papers import (
    explorer_card,
    explorer_html,
    paper_choice_label,
    papers_html,
    save_button,
    saved_html,
    score_words,
    status_markdown,
    topic_map_svg,
)

__all__ = [
    "esc",
    "md_escape",
    "md_model_text",
    "html_model_text",
    "safe_url",
    "paper_link",
    "content_words",
    "highlight",
    "strip_markers",
    "md_with_links",
    "cite_link",
    "stream_markdown",
    "STOPPED_MARKDOWN",
    "stopped_panel",
    "sentence_markdown",
    "match_words",
    "relevance_words",
    "support_words",
    "answer_markdown",
    "error_markdown",
    "paper_heading",
    "mark_spans",
    "citation_card",
    "hit_card",
    "citations_panel",
    "error_panel",
    "comparison_html",
    "score_words",
    "save_button",
    "explorer_card",
    "explorer_html",
    "papers_html",
    "saved_html",
    "topic_map_svg",
    "status_markdown",
    "paper_choice_label",
    "CSS",
    "JS",
]
