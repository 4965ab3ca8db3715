"""Multi-vector late interaction (ColBERT, ColPali / ColQwen): a model returns one matrix of token
vectors per input, and a candidate's score is MaxSim, the sum over the query's tokens of the
largest dot product with any of the candidate's tokens (Khattab & Zaharia, 2020). Token vectors are
L2-normalised, as ColBERT and ColQwen do, so each term is a cosine.

`MultiVectorModel` is the mechanism: the cache keeps token matrices (keyed like single vectors:
model identity and input hash), and candidates are embedded and scored a batch at a time against
every query, so memory is bounded by the queries' matrices plus one candidate batch. Scores go to
the same tie-aware metrics as any model's. `multivector:<path>` runs a local transformers encoder
(BERT-like) that way, one vector per token of its last hidden state.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.scoring.cache import EmbeddingCache, input_key, model_key
from harness.scoring.data import Item
from harness.models.adapters import (DenseModel, Model, ModelError, PoolScores, RunSettings, directory_fingerprint,
                            register_model_kind, timed_model_call)
from harness.scoring.truncation import truncate_middle
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError


def maxsim(query: np.ndarray, candidates: list[np.ndarray]) -> np.ndarray:
    """MaxSim of one query matrix [L, d] against candidate matrices [T_i, d]: [n_candidates].
    The candidates are padded to one [n, T, d] block, padding masked out of the max."""
    if not candidates:
        return np.zeros(0, dtype=np.float32)
    longest = max(len(c) for c in candidates)
    block = np.zeros((len(candidates), longest, query.shape[1]), dtype=np.float32)
    real = np.zeros((len(candidates), longest), dtype=bool)
    for i, matrix in enumerate(candidates):
        block[i, :len(matrix)] = matrix
        real[i, :len(matrix)] = True
    similarity = block @ query.T  # [n, T, L]
    similarity = np.where(real[:, :, None], similarity, -np.inf)
    best = similarity.max(axis=1)  # [n, L]: each query token's best candidate token
    best[~np.isfinite(best)] = 0.0  # a candidate with no tokens matches nothing
    return best.sum(axis=1, dtype=np.float64).astype(np.float32)


class MultiVectorModel(DenseModel):
    """A model that embeds each input as a token matrix; subclasses give ``embed_tokens``."""

    runs_on_executors = False

    def embed_tokens(self, items: list[Item]) -> tuple[list[np.ndarray], list[bool]]:
        """Token matrices [n_tokens, d] (any scale) and whether each input was truncated."""
        raise NotImplementedError

    def _matrices(self, batch: list[Item], cache: EmbeddingCache, stats: PoolScores) -> tuple[list[np.ndarray], int]:
        """The batch's unit-row token matrices, from the cache or embedded (and then cached), and
        how many of them were truncated."""
        key_of_model = model_key(self.identity())
        keys = [input_key(item) for item in batch]
        found = cache.get_matrices(key_of_model, keys)
        missing = [i for i, key in enumerate(keys) if key not in found]
        if missing:
            matrices, flags = timed_model_call(stats, self.embed_tokens, [batch[i] for i in missing])
            fresh = []
            for i, matrix, truncated in zip(missing, matrices, flags):
                matrix = np.asarray(matrix, dtype=np.float32).reshape(len(matrix), -1)
                matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
                found[keys[i]] = (matrix, bool(truncated))
                fresh.append((keys[i], matrix, bool(truncated)))
            cache.put_matrices(key_of_model, fresh)
            stats.embedded += len(missing)
        stats.cached += len(batch) - len(missing)
        return [found[key][0] for key in keys], sum(found[key][1] for key in keys)

    def score_pool(self, pool, cache, settings):
        from tqdm.auto import tqdm

        stats = PoolScores(scores=np.zeros((len(pool.query_ids), len(pool.corpus_ids)), dtype=np.float32))
        size = settings.batch_size
        queries: list[np.ndarray] = []
        for batch in pool.iter_queries(size):
            matrices, truncated = self._matrices([self.format_query(q) for q in batch], cache, stats)
            queries += matrices
            stats.truncated_queries += truncated
        column = 0
        with tqdm(total=len(pool.corpus_ids), desc=f"{pool.info.name} candidates", unit="item",
                  disable=not settings.progress, leave=False, dynamic_ncols=True) as bar:
            for batch in pool.iter_candidates(size):
                matrices, truncated = self._matrices(batch, cache, stats)
                stats.truncated_candidates += truncated
                if any(m.shape[1] != queries[0].shape[1] for m in matrices):
                    raise ModelError("query and candidate token vectors differ in size")
                for row, query in enumerate(queries):
                    stats.scores[row, column:column + len(batch)] = maxsim(query, matrices)
                column += len(batch)
                bar.update(len(batch))
        stats.details = {"scoring": "maxsim"}
        return stats


class TokenVectorsModel(MultiVectorModel):
    """A local transformers encoder read as a multi-vector model: one vector per real token of its
    last hidden state (special tokens included, padding excluded), text only; inputs over the window
    lose their middle."""

    def __init__(self, path: str, settings: RunSettings):
        super().__init__(settings)
        if not Path(path).is_dir():
            raise UserError(f"multivector: no model directory at {path}")
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.path, self.spec, self.torch = Path(path), f"multivector:{path}", torch
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.tokenizer.padding_side = "right"  # embed_tokens reads the real tokens first
        self.model = AutoModel.from_pretrained(path, local_files_only=True).to(settings.device).eval()
        self.window = settings.max_length or getattr(self.model.config, "max_position_embeddings", 512)
        self.revision = directory_fingerprint(self.path)

    def identity(self) -> dict:
        return {"model": self.spec, "revision": self.revision, "max_length": self.window,
                "query_template": self.query_template, "pooling": "multi-vector (every token), MaxSim"}

    def embed_tokens(self, items):
        texts, flags = [], []
        budget = self.window - self.tokenizer.num_special_tokens_to_add()
        for item in items:
            text = item.text.replace(IMAGE_PLACEHOLDER, " ")
            ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
            kept, truncated = truncate_middle(ids, [1] * len(ids), budget)
            # decoding and re-encoding can shift a token or two; the end truncation below is the backstop
            texts.append(self.tokenizer.decode(kept) if truncated else text)
            flags.append(truncated)
        inputs = self.tokenizer(texts, padding=True, truncation=True, max_length=self.window,
                                return_tensors="pt").to(self.settings.device)
        with self.torch.no_grad():
            hidden = self.model(**inputs).last_hidden_state.float().cpu().numpy()
        lengths = inputs["attention_mask"].sum(dim=1).tolist()
        return [hidden[i, :n] for i, n in enumerate(lengths)], flags  # right padding: real tokens first


@register_model_kind("multivector", "multivector:<path>")
def _multivector(argument: str, settings: RunSettings) -> Model:
    return TokenVectorsModel(argument, settings)
