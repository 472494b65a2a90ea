"""Provider registries: the LLMs and the embedding models, each behind a name.

The engine asks for a provider by name only (``AQA_LLM_PROVIDER``,
``AQA_EMBED_PROVIDER``): ``make_llm``/``make_embed_model`` look the name up
here and call its factory with the ``Settings``. The built-in providers are
registered by dotted path, so neither this module nor ``rag.config`` (which
checks setting values against these names) imports a model library; a
provider's module is imported when it is first made.

Adding one, e.g. a test fake (see ``tests/conftest.py``)::

    from rag.providers import register_llm
    register_llm("fake", lambda settings: FakeLLM("..."))
    # then AQA_LLM_PROVIDER=fake, or Settings(llm_provider="fake")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rag.errors import AqaError

if TYPE_CHECKING:
    from rag.config import Settings

T = TypeVar("T")
Factory = Callable[["Settings"], Any]


class Registry(Generic[T]):
    """Names to factories ``settings -> provider``. A factory may be given as
    ``"module:attribute"``, imported on first use."""

    def __init__(self, kind: str, setting: str) -> None:
        self.kind, self.setting = kind, setting
        self._factories: dict[str, Factory | str] = {}

    def register(self, name: str, factory: Factory | str, *, replace: bool = False) -> None:
        if name in self._factories and not replace:
            raise ValueError(f"{self.kind} provider {name!r} is already registered")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        self._factories.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def factory(self, name: str) -> Factory:
        try:
            f = self._factories[name]
        except KeyError:
            raise AqaError(
                f"Unknown {self.kind} provider '{name}' ({self.setting}): choose one of "
                f"{', '.join(self.names())}."
            ) from None
        if isinstance(f, str):
            module, _, attr = f.partition(":")
            f = getattr(importlib.import_module(module), attr)
        return f

    def create(self, name: str, settings: Settings) -> T:
        return self.factory(name)(settings)


LLM_PROVIDERS: Registry[Any] = Registry("LLM", "AQA_LLM_PROVIDER")
EMBED_PROVIDERS: Registry[Any] = Registry("embedding", "AQA_EMBED_PROVIDER")

# Built-ins (names as the settings' values).
LLM_PROVIDERS.register("local", "rag.llm:LocalLLM")  # llama.cpp, in process
LLM_PROVIDERS.register("openai", "rag.llm:OpenAILLM")  # any OpenAI-compatible server
EMBED_PROVIDERS.register("minilm", "rag.embed:minilm_embedding")  # ONNX or torch backend
EMBED_PROVIDERS.register("wordllama", "rag.embed:wordllama_embedding")
EMBED_PROVIDERS.register("openai", "rag.embed:openai_embedding")


def register_llm(name: str, factory: Factory | str, *, replace: bool = False) -> None:
    """Make ``AQA_LLM_PROVIDER=name`` build ``factory(settings)`` (an ``rag.llm.LLM``)."""
    LLM_PROVIDERS.register(name, factory, replace=replace)


def register_embedding(name: str, factory: Factory | str, *, replace: bool = False) -> None:
    """Make ``AQA_EMBED_PROVIDER=name`` build ``factory(settings)`` (a LlamaIndex
    ``BaseEmbedding``); its vectors are recorded in the index under ``name``."""
    EMBED_PROVIDERS.register(name, factory, replace=replace)
