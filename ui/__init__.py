"""abstracts-qa web UI (Gradio): ``ui.app.build_app(engine)`` builds it,
``ui.app.serve()`` runs it (``aqa serve``). Rendering lives in ``ui.render``,
downloads in ``ui.export``; all answers come from the ``rag.Engine`` API."""
