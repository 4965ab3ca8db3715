"""Boundary-token readout for generative embedders (EviAlign, Chen et al., "Learning
Multimodal Embeddings with Evidence-Aligned Readout", 2026, §3.3-3.4, eq. 5-6).

``hfgen:<path-or-name>`` (or ``hf:<path>`` with ``--pooling boundary|trailing|distributed``) loads a
causal or vision-language model with its LM head. For each input (a query with its instruction
template, or a candidate) it

1. generates the evidence greedily, one input at a time (so the evidence never depends on its
   batch neighbours), at most ``--max-new-tokens`` tokens, stopping at end-of-sequence;
2. runs one forward pass over prompt + generated ids and keeps the final-layer hidden states at
   the **first** occurrence of each readout token in the generated part, and at the last
   generated token;
3. pools: the mean of the states of the selected readout tokens, L2-normalised; a token the model
   did not write is read at the last generated token (the paper's fallback).

Readouts (``--pooling``): ``boundary`` (all readout tokens, paper default), ``distributed`` (the same
rule; for models trained with the tokens spread through the evidence), ``trailing`` (the last
readout token only: ``<SUM>`` for the paper's five and seven units; for its K = 1 and K = 3 sets,
which have no Summary, their last token ``<ENT>`` / ``<REL>``, the state after the complete
evidence), ``last`` (the last generated token). ``--readout-units K`` reads the paper's K-unit set. Diagnostics:
``--readout-subset`` (one-slot: only these tokens) and ``--readout-drop`` (leave-one-out).

What each input generated (ids, text, where each token fell, duplicates, the states needed for
every readout) is stored beside the embedding cache, in the table ``boundary_generations`` of its
SQLite file, keyed by the generation settings (model, revision, window, template, max new tokens,
readout tokens, forced logits processors) and the input; changing only the readout reuses the
generations. Per pool the result reports format validity (every readout token once, in order,
nothing after the last one but end-of-sequence), fallbacks per token and mean generated length.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.scoring.cache import EmbeddingCache, input_key, model_key
from harness.scoring.data import Item
from harness.models.adapters import (
    DEFAULT_QUERY_TEMPLATE, READOUT_POOLINGS, DenseModel, HFModel, ModelError, RunSettings, directory_fingerprint,
    register_model_kind)
from harness.scoring.truncation import truncate_middle
from mmlongembed.core.errors import UserError
from mmlongembed.ops.evialign import locate_readout, units_for

DEFAULT_READOUT_TOKENS = tuple(u.token for u in units_for(5))  # the paper's five; --readout-units K for the others
DEFAULT_MAX_NEW_TOKENS = 256
_SPLIT = "\x00MMLE-CONTENT\x00"


@dataclass
class Generation:
    """One input's generated evidence and the final-layer states the readouts need."""

    generated: list[int]
    text: str
    positions: dict[str, int | None]  # readout token -> first position in the generated ids
    duplicates: dict[str, int]
    valid_format: bool
    n_generated: int  # tokens before end-of-sequence
    truncated: bool
    states: np.ndarray  # [n readout tokens + 1, d]: each token's state (zeros if absent), then the last token's

    def record(self) -> dict:
        return {"generated": self.generated, "text": self.text, "positions": self.positions,
                "duplicates": self.duplicates, "valid_format": self.valid_format, "n_generated": self.n_generated,
                "truncated": self.truncated}


class GenerationStore:
    """The generations beside the embedding cache (same SQLite file), or in memory without one."""

    def __init__(self, cache: EmbeddingCache):
        self.connection = cache.connection if cache.persistent else None
        self.memory: dict[tuple[str, str], Generation] = {}
        if self.connection is not None:
            self.connection.execute(
                "CREATE TABLE IF NOT EXISTS boundary_generations (generation TEXT, input TEXT, record TEXT, "
                "states BLOB, rows INTEGER, dim INTEGER, PRIMARY KEY (generation, input))")
            self.connection.commit()

    @property
    def location(self) -> str | None:
        if self.connection is None:
            return None
        return next((row[2] for row in self.connection.execute("PRAGMA database_list") if row[1] == "main"), None)

    def get(self, generation: str, key: str) -> Generation | None:
        if (generation, key) in self.memory:
            return self.memory[(generation, key)]
        if self.connection is None:
            return None
        row = self.connection.execute("SELECT record, states, rows, dim FROM boundary_generations WHERE generation = ? "
                                      "AND input = ?", (generation, key)).fetchone()
        if row is None:
            return None
        record = json.loads(row[0])
        states = np.frombuffer(row[1], dtype=np.float32).reshape(row[2], row[3])
        return Generation(states=states, **record)

    def put(self, generation: str, key: str, value: Generation) -> None:
        self.memory[(generation, key)] = value
        if self.connection is not None:
            states = np.ascontiguousarray(value.states, dtype=np.float32)
            self.connection.execute("INSERT OR REPLACE INTO boundary_generations VALUES (?, ?, ?, ?, ?, ?)",
                                    (generation, key, json.dumps(value.record()), states.tobytes(), *states.shape))
            self.connection.commit()


class GenerativeReadoutModel(DenseModel):
    """A transformers causal or vision-language model read at its boundary tokens (module doc)."""

    runs_on_executors = False

    query_template = DEFAULT_QUERY_TEMPLATE
    # Qwen-VL inputs are assembled as HFModel does (placeholders -> vision tokens, images through
    # the model's image processor, truncation keeps images whole).
    _units = HFModel._units
    _image_cost = HFModel._image_cost

    def __init__(self, name: str, settings: RunSettings):
        super().__init__(settings)
        import torch
        from transformers import AutoConfig, AutoTokenizer

        self.name, self.spec, self.torch = name, f"hfgen:{name}", torch
        self.pooling = settings.pooling or "boundary"
        if self.pooling not in READOUT_POOLINGS:
            raise UserError(f"--pooling {self.pooling!r}: a generative model reads out at "
                            f"{', '.join(READOUT_POOLINGS)}")
        local = Path(name).exists()
        try:
            config = AutoConfig.from_pretrained(name, local_files_only=local or None)
            self.tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local or None)
        except OSError as exc:
            raise UserError(f"hfgen: cannot load {name!r}: {str(exc).splitlines()[0]}") from None
        self.readout_tokens = tuple(settings.readout_tokens or DEFAULT_READOUT_TOKENS)
        self.token_ids = [self._single_id(t) for t in self.readout_tokens]
        self.selected = self._selected(settings)
        self.max_new_tokens = settings.max_new_tokens or DEFAULT_MAX_NEW_TOKENS
        try:
            self.model = self._load(name, config, local).to(settings.device).eval()
        except OSError as exc:
            raise UserError(f"hfgen: cannot load {name!r}: {str(exc).splitlines()[0]}") from None
        self.revision = (directory_fingerprint(Path(name)) if local
                         else getattr(config, "_commit_hash", None) or "unknown")
        text_config = getattr(config, "text_config", config)
        self.window = settings.max_length or getattr(text_config, "max_position_embeddings", None) or 8192
        if self.window <= self.max_new_tokens + 8:
            raise UserError(f"--max-length {self.window} leaves no room for the prompt beside "
                            f"--max-new-tokens {self.max_new_tokens}")
        self.image_processor = None
        self.image_token_id = getattr(config, "image_token_id", None)
        if getattr(config, "vision_config", None) is not None and self.image_token_id is not None:
            self.image_processor = HFModel._load_image_processor(name, local)
            self.modalities = frozenset({"text", "image"})
            self.vision_start_id, self.vision_end_id = self.tokenizer.convert_tokens_to_ids(
                ["<|vision_start|>", "<|vision_end|>"])
        eos = getattr(self.model.generation_config, "eos_token_id", None) or self.tokenizer.eos_token_id
        self.end_ids = sorted({eos} if isinstance(eos, int) else set(eos or []))
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end_ids[0]
        self.prefix_ids, self.suffix_ids, self.chat_template = self._template()
        self.logits_processors: list = []  # forced decoding (tests); part of the generation key
        self.store: GenerationStore | None = None

    @staticmethod
    def _load(name, config, local):
        from transformers import AutoModelForCausalLM

        if getattr(config, "vision_config", None) is not None:
            from transformers import AutoModelForImageTextToText

            return AutoModelForImageTextToText.from_pretrained(name, local_files_only=local or None)
        return AutoModelForCausalLM.from_pretrained(name, local_files_only=local or None)

    def _single_id(self, token: str) -> int:
        ids = self.tokenizer.encode(token, add_special_tokens=False)
        if len(ids) != 1:
            raise UserError(f"--readout-tokens: {token!r} is not one token of {self.name}'s tokenizer "
                            f"(it encodes to {len(ids)} ids); was the model trained with it?")
        return ids[0]

    def _selected(self, settings: RunSettings) -> tuple[str, ...]:
        subset, drop = tuple(settings.readout_subset or ()), tuple(settings.readout_drop or ())
        unknown = [t for t in subset + drop if t not in self.readout_tokens]
        if unknown:
            raise UserError(f"--readout-subset/--readout-drop: {unknown} are not readout tokens "
                            f"({', '.join(self.readout_tokens)})")
        if self.pooling == "last":
            chosen: tuple[str, ...] = ()
        elif self.pooling == "trailing":
            chosen = self.readout_tokens[-1:]
        else:
            chosen = self.readout_tokens
        if subset:
            chosen = tuple(t for t in chosen if t in subset)
        chosen = tuple(t for t in chosen if t not in drop)
        if not chosen and self.pooling != "last":
            raise UserError("--readout-subset/--readout-drop leave no readout token")
        return chosen

    def _template(self) -> tuple[list[int], list[int], str | None]:
        """The chat template around the input as token ids (none when the tokenizer has no template)."""
        template = getattr(self.tokenizer, "chat_template", None)
        if not template:
            return [], [], None
        rendered = self.tokenizer.apply_chat_template([{"role": "user", "content": _SPLIT}], tokenize=False,
                                                      add_generation_prompt=True)
        head, _, tail = rendered.partition(_SPLIT)
        encode = lambda s: self.tokenizer.encode(s, add_special_tokens=False) if s else []  # noqa: E731
        return encode(head), encode(tail), hashlib.sha256(template.encode()).hexdigest()[:16]

    # -- identities ----------------------------------------------------------------------------------
    def generation_identity(self) -> dict:
        return {"model": self.spec, "revision": self.revision, "max_length": self.window,
                "query_template": self.query_template, "chat_template": self.chat_template,
                "max_new_tokens": self.max_new_tokens, "decoding": "greedy",
                "readout_tokens": list(self.readout_tokens),
                "logits_processors": [getattr(p, "cache_key", type(p).__name__) for p in self.logits_processors]}

    def identity(self) -> dict:
        return {**self.generation_identity(), "pooling": self.pooling, "readout": list(self.selected),
                "fallback": "last generated token"}

    # -- generation and readout ----------------------------------------------------------------------
    def _prompt(self, item: Item):
        units, costs = self._units(item)
        budget = self.window - self.max_new_tokens - len(self.prefix_ids) - len(self.suffix_ids)
        kept, truncated = truncate_middle(units, costs, budget)
        ids, images = list(self.prefix_ids), []
        for unit in kept:
            if isinstance(unit, tuple):
                ids += [self.vision_start_id] + [self.image_token_id] * unit[2] + [self.vision_end_id]
                images.append(unit[1])
            else:
                ids.append(unit)
        return ids + self.suffix_ids, images, truncated

    def _model_inputs(self, ids: list[int], images) -> dict:
        torch = self.torch
        input_ids = torch.tensor([ids], device=self.settings.device)
        inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
        if images:
            vision = self.image_processor(images=images, return_tensors="pt")
            inputs["pixel_values"] = vision["pixel_values"].to(self.settings.device)
            inputs["image_grid_thw"] = vision["image_grid_thw"].to(self.settings.device)
            inputs["mm_token_type_ids"] = (input_ids == self.image_token_id).long()
        return inputs

    def generate(self, item: Item) -> Generation:
        from transformers import LogitsProcessorList

        torch = self.torch
        prompt, images, truncated = self._prompt(item)
        with torch.no_grad():
            output = self.model.generate(
                **self._model_inputs(prompt, images), max_new_tokens=self.max_new_tokens, do_sample=False,
                num_beams=1, logits_processor=LogitsProcessorList(self.logits_processors),
                eos_token_id=self.end_ids, pad_token_id=self.pad_id)
        generated = output[0, len(prompt):].tolist()
        end = next((i for i, t in enumerate(generated) if t in self.end_ids), None)
        if end is not None:
            generated = generated[:end + 1]  # the end-of-sequence token is the last generated one
        with torch.no_grad():
            hidden = self.model(**self._model_inputs(prompt + generated, images),
                                output_hidden_states=True).hidden_states[-1][0].float()
        readout = locate_readout(generated, self.token_ids, self.end_ids)
        # the last generated token (the prompt's last token if nothing was generated)
        last = len(prompt) + readout.last
        states = np.zeros((len(self.token_ids) + 1, hidden.shape[-1]), dtype=np.float32)
        for k, token in enumerate(self.token_ids):
            if readout.positions[token] is not None:
                states[k] = hidden[len(prompt) + readout.positions[token]].cpu().numpy()
        states[-1] = hidden[last].cpu().numpy()
        names = dict(zip(self.token_ids, self.readout_tokens))
        return Generation(
            generated=generated, text=self.tokenizer.decode(generated, skip_special_tokens=False),
            positions={names[t]: p for t, p in readout.positions.items()},
            duplicates={names[t]: n for t, n in readout.duplicates.items()}, valid_format=readout.valid_format,
            n_generated=len(generated) - (1 if end is not None else 0), truncated=truncated, states=states)

    def pooled(self, generation: Generation) -> np.ndarray:
        """Mean of the selected tokens' states (absent ones read at the last generated token), L2-normalised."""
        index = {t: k for k, t in enumerate(self.readout_tokens)}
        rows = [generation.states[index[t]] if generation.positions[t] is not None else generation.states[-1]
                for t in self.selected] or [generation.states[-1]]
        vector = np.mean(rows, axis=0)
        return vector / max(float(np.linalg.norm(vector)), 1e-12)

    def _generation(self, item: Item) -> Generation:
        if self.store is None:  # embedding outside a scoring run: generations kept in memory
            self.store = GenerationStore(EmbeddingCache(None))
        generation_key, key = model_key(self.generation_identity()), input_key(item)
        found = self.store.get(generation_key, key)
        if found is None:
            try:
                found = self.generate(item)
            except (ModelError, UserError):
                raise
            except Exception as exc:  # noqa: BLE001  (a model failure skips the pool, one line)
                raise ModelError(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
            self.store.put(generation_key, key, found)
        return found

    def embed(self, items):
        generations = [self._generation(item) for item in items]
        return np.stack([self.pooled(g) for g in generations]), [g.truncated for g in generations]

    # -- a pool --------------------------------------------------------------------------------------
    def score_pool(self, pool, cache, settings):
        self.store = GenerationStore(cache)
        try:
            scored = super().score_pool(pool, cache, settings)
            start = time.perf_counter()
            # every input's generation, also those whose vectors came from the cache
            generations = [self._generation(self.format_query(q)) for batch in pool.iter_queries(64) for q in batch]
            generations += [self._generation(c) for batch in pool.iter_candidates(64) for c in batch]
            scored.embed_seconds += time.perf_counter() - start
            location = self.store.location
        finally:
            self.store = None  # the cache closes after the run; later calls keep generations in memory
        scored.details["readout"] = readout_report(generations, self.readout_tokens, self.selected, location)
        summary = scored.details["readout"]
        scored.notes.append(f"readout {self.pooling} over {', '.join(self.selected) or 'the last token'}: "
                            f"format valid {summary['format_valid']}/{summary['inputs']}, mean generated length "
                            f"{summary['mean_generated_tokens']}")
        return scored


def readout_report(generations: list[Generation], tokens, selected, location: str | None) -> dict:
    """Per pool: format validity, fallbacks and duplicates per token, mean generated length."""
    n = len(generations)
    valid = sum(g.valid_format for g in generations)
    return {
        "inputs": n, "format_valid": valid, "format_validity": round(valid / n, 4) if n else None,
        "fallbacks": {t: sum(g.positions[t] is None for g in generations) for t in tokens},
        "fallbacks_used": {t: sum(g.positions[t] is None for g in generations) for t in selected},
        "duplicates": {t: sum(g.duplicates.get(t, 0) > 0 for g in generations) for t in tokens},
        "mean_generated_tokens": round(sum(g.n_generated for g in generations) / n, 2) if n else None,
        "evidence_store": {"sqlite": location, "table": "boundary_generations"} if location else None,
    }


@register_model_kind("hfgen", "hfgen:<path-or-name>")
def _generative_readout(argument: str, settings: RunSettings) -> GenerativeReadoutModel:
    return GenerativeReadoutModel(argument, settings)
