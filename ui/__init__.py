"""abstracts-qa web UI (Gradio): ``ui.app.build_app(engine)`` lays it out,
``ui.server.serve()`` runs it (``aqa serve``). Handlers live in ``ui.session``
and ``ui.explorer``, rendering in ``ui.render``, downloads in ``ui.export``;
all answers come from the ``rag.Engine`` API. Importing it changes nothing
(no environment variables, no threads)."""
