"""The answer core: a question in, a grounded answer (or a decline) out.

Data flows one way through these modules, each owning one concept:

- ``conversation``: a follow-up interpreted against the papers cited before;
- ``reading``: what a question asks for and which papers it names (predicates);
- ``index_terms``: the indexed corpus's word and name statistics;
- ``evidence``: candidate sentences, the numbered excerpts, the model's JSON choice;
- ``rules``: the named rules over questions and evidence (each traced);
- ``decision``: the calibrated decision over every signal (answer / not confirmed / decline);
- ``paper_relevance``: for "which papers…", the per-paper decision of what to cite;
- ``citations``: numbered citations and the early passages;
- ``declines``: which kind of non-answer, and its wording;
- ``verify``: each synthesis sentence checked against the evidence it cites;
- ``steps``: the LLM steps (choose, check, write) as swappable functions;
- ``pipeline``: ``Answerer``, which runs them in order.

Importing the package imports none of them; ``rag.engine`` uses
``rag.answer.pipeline.Answerer``.
"""
