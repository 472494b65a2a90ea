"""wordllama as a LlamaIndex ``BaseEmbedding`` (``rag.embed``'s ``wordllama``
provider). Its own module so that importing ``rag.embed`` (every engine does)
does not import ``llama_index.core``, about 1 s of a fresh process."""

from __future__ import annotations

from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr


class WordLlamaEmbedding(BaseEmbedding):
    _model: Any = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(model_name="wordllama", **kwargs)
        self._model = load_wordllama()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        vecs = np.asarray(self._model.embed(texts), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
        return vecs.tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def load_wordllama():
    """The bundled l2_supercat 256-d model, from the package folder only.

    ``WordLlama.load()`` looks for its tokenizer in ``wordllama/tokenizer/``
    but the package ships ``wordllama/tokenizers/``, so it would try to
    download it; we assemble the model from the shipped files instead.
    """
    from safetensors import safe_open
    from wordllama import WordLlama
    from wordllama.inference import WordLlamaInference

    from rag.models import package_dir

    root = package_dir("wordllama")
    weights = root / "weights" / "l2_supercat_256.safetensors"
    tokenizer = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
    with safe_open(str(weights), framework="np", device="cpu") as f:
        table = f.get_tensor("embedding.weight")
    return WordLlamaInference(table, WordLlama.load_tokenizer(tokenizer))
