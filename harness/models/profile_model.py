"""Run a model profile (harness.profiles.catalogue) as its authors run it: the profile's prompt per side, its
image limits, its position scheme and pooling, on the weights of a local directory
(`--model-path NAME=DIR`) or the Hub repo at the pinned revision.

The input is assembled as the model's own processor does it (each image's `<|image_pad|>` repeated
once per visual token), from the model's tokenizer and image processor; transformers 5 cannot build
the Qwen-VL processors without torchvision (their video half), so `image_only_processor` builds the
real processor class without it. Inputs longer than the window lose their middle (the paper's rule):
the template's head and tail stay, images are kept or dropped whole.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.scoring.data import Item
from harness.models.adapters import (DenseModel, ModelError, RunSettings, directory_fingerprint,
                            image_token_cost)
from harness.profiles.catalogue import get_profile
from harness.profiles.schema import ImageLimits, ModelProfile
from harness.models import qwen_vision
from harness.scoring.truncation import truncate_middle
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError

CONTENT = "\x00content\x00"  # splits a side's prompt into the head and tail around the item's content


def prepared_size(height: int, width: int, limits: ImageLimits) -> tuple[int, int]:
    """The size at which the model's own code hands an image to its processor."""
    if limits.pre_resize is None:
        return height, width
    return qwen_vision.smart_resize(height, width, limits.factor, *limits.pre_resize)


def prepared_image(data: bytes, limits: ImageLimits):
    """The image as the model's own code hands it to the processor (GME, Rzen, Embed-RL snap it first)."""
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    height, width = prepared_size(image.height, image.width, limits)
    return image if (height, width) == (image.height, image.width) else image.resize((width, height))


def image_size(data: bytes) -> tuple[int, int]:
    """(height, width) from the image's header, without decoding its pixels."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.height, image.width


def image_processor_for(directory: str, limits: ImageLimits):
    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(directory, min_pixels=limits.min_pixels, max_pixels=limits.max_pixels)


def image_only_processor(processor_class, directory: str, limits: ImageLimits | None = None, tokenizer=None):
    """The model's real processor class (e.g. Qwen2VLProcessor) with its tokenizer and image
    processor, without the video processor that needs torchvision: its `__call__` expands image
    placeholders exactly as the full processor does."""
    from transformers import AutoImageProcessor, AutoTokenizer

    processor = object.__new__(processor_class)
    processor.tokenizer = tokenizer or AutoTokenizer.from_pretrained(directory)
    processor.image_processor = (image_processor_for(directory, limits) if limits is not None
                                 else AutoImageProcessor.from_pretrained(directory))
    processor.chat_template = None
    for kind in ("image", "video"):
        token = f"<|{kind}_pad|>"
        setattr(processor, f"{kind}_token", token)
        setattr(processor, f"{kind}_token_id", processor.tokenizer.convert_tokens_to_ids(token))
    return processor


@dataclass
class Encoded:
    """One item as the model reads it: token ids with image slots, its images, and its own length."""

    ids: list[int]
    images: list
    own_tokens: int  # the whole input in the model's own tokens, before truncation
    truncated: bool
    videos: list = field(default_factory=list)  # clips (frames, 3, height, width) of a frame sequence fed as video


class ProfileModel(DenseModel):
    """A profile's model: prompt per side, own image pricing, own positions and pooling."""

    def __init__(self, profile: ModelProfile, settings: RunSettings, path: str | None = None):
        super().__init__(settings)
        if not profile.runnable:
            raise UserError(f"--model {profile.name}: {profile.unverified_reason}")
        import torch
        from transformers import AutoTokenizer

        self.profile, self.spec, self.torch = profile, profile.name, torch
        source = path or profile.repo
        local = Path(source).exists()
        if path is not None and not local:
            raise UserError(f"--model-path {profile.name}={path}: no such directory")
        kwargs = {"local_files_only": True} if local else {"revision": profile.revision}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            # as the model's own code adds them (Embed-RL's "<emb>", where a checkpoint's tokenizer lacks it)
            missing = [t for t in profile.added_tokens if t not in self.tokenizer.get_vocab()]
            if missing:
                self.tokenizer.add_tokens(missing)
            dtype = torch.float32 if settings.device == "cpu" else getattr(torch, profile.dtype)
            # without weights: the driver of several devices, which only plans and reads the cache
            self.model = (self.load_weights(source, dtype, kwargs).to(settings.device).eval()
                          if settings.load_weights else None)
            self.image_processor = image_processor_for(source, profile.images)
        except OSError as exc:
            raise UserError(f"--model {profile.name}: cannot load {source!r}: {str(exc).splitlines()[0]}") from None
        self._check_added_tokens()
        self.revision = directory_fingerprint(Path(source)) if local else profile.revision
        self._source, self._load_kwargs, self._video_settings = source, kwargs, None
        self.window = settings.max_length or profile.window
        self.image_token_id = self.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.video_token_id = self.tokenizer.convert_tokens_to_ids("<|video_pad|>")
        # set per pool (score_pool): the candidates are ordered frame sequences
        self.frame_sequences = False
        self.modalities = frozenset({"text", "image"})
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def _check_added_tokens(self) -> None:
        """An added token (Embed-RL's <emb>) needs a row in the embedding table: the checkpoints have one."""
        if self.model is None:
            return
        rows = self.model.get_input_embeddings().num_embeddings
        for token in self.profile.added_tokens:
            if self.tokenizer.convert_tokens_to_ids(token) >= rows:
                raise UserError(f"--model {self.profile.name}: the weights have no embedding for {token} (token id "
                                f"{self.tokenizer.convert_tokens_to_ids(token)}, {rows} rows): not its checkpoint")

    def load_weights(self, source: str, dtype, kwargs: dict):
        """The model (the backbone whose last hidden states the profile pools)."""
        from transformers import AutoModel

        return AutoModel.from_pretrained(source, dtype=dtype, **kwargs)

    def identity(self) -> dict:
        return {"model": self.spec, "profile": self.profile.name, "repo": self.profile.repo,
                "revision": self.revision, "max_length": self.window, "family": self.profile.family,
                "pooling": {"query": self.profile.query.pooling, "document": self.profile.document.pooling},
                "query_template": self.profile.query.template, "document_template": self.profile.document.template,
                "positions": self.profile.positions, "image_limits": vars(self.profile.images),
                "frames": self.profile.frames, "video": vars(self.profile.video) if self.profile.video else None,
                "status": self.profile.status, **self._form_extras()}

    def _form_extras(self) -> dict:
        """What else a side's form adds around the content (Embed-RL's suffix, the token after the pooled
        one, the instruction's joiner, its added tokens; VLM2Vec's space after the leading images): part of the cache key where a profile has any."""
        extras = {}
        for side, form in (("query", self.profile.query), ("document", self.profile.document)):
            if form.content_suffix or form.after_pooled or form.instruction_joiner:
                extras[f"{side}_form"] = {"content_suffix": form.content_suffix, "after_pooled": form.after_pooled,
                                          "instruction_joiner": form.instruction_joiner}
            if form.after_leading_images:  # VLM2Vec's space after the leading images
                extras.setdefault(f"{side}_form", {})["after_leading_images"] = form.after_leading_images
        if self.profile.added_tokens:
            extras["added_tokens"] = list(self.profile.added_tokens)
        return extras

    # ---- input assembly -------------------------------------------------------------------------
    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] if text else []

    def image_cost(self, data: bytes) -> int:
        """Visual tokens of one image (after the model's own resizing)."""
        height, width = prepared_size(*image_size(data), self.profile.images)
        return image_token_cost(self.image_processor, height, width)

    def _markup(self) -> tuple[list[int], list[int]]:
        head, _, tail = self.profile.image_markup.partition("<|image_pad|>")
        return self._ids(head), self._ids(tail)

    def _as_video(self, item: Item) -> bool:
        """In a pool of frame-sequence candidates an item's images are its frames (the queries there are
        text): fed as the model's video input where the profile says its code does so."""
        return self.frame_sequences and bool(item.images) and self.profile.frames == "video"

    def _image_units(self, item: Item, form) -> tuple[list, list[int]]:
        """Text tokens and images at their placeholders, each with its cost in tokens."""
        open_ids, close_ids = self._markup()
        units, costs = [], []
        for i, run in enumerate(form.content(item.text, item.instruction, IMAGE_PLACEHOLDER).split(IMAGE_PLACEHOLDER)):
            ids = self._ids(run)
            units += ids
            costs += [1] * len(ids)
            if i < len(item.images):
                n = self.image_cost(item.images[i])
                units.append(("image", i, n))
                costs.append(n + len(open_ids) + len(close_ids))
        return units, costs

    def _video_units(self, item: Item, form) -> tuple[list, list[int]]:
        """The frames as one video (kept or dropped whole) and the item's text: after the video
        (Qwen3-VL-Embedding's embedder) or before it (Embed-RL's, whose text is then tokenized with
        the video's first timestamp, as in its chat template's output); then the form's suffix."""
        video = self.profile.video
        sizes = [image_size(data) for data in item.images]
        n_frames, _, _, per_group = qwen_vision.layout(sizes, self.profile.images.factor, video)
        video_text = qwen_vision.prompt(n_frames, per_group, video.fps(len(item.images)))
        content = form.content(item.text, item.instruction, IMAGE_PLACEHOLDER)
        rest = content[:len(content) - len(form.content_suffix)].replace(IMAGE_PLACEHOLDER, "")
        rest = rest if rest.strip() else ""  # frames alone: the official code gets no text
        suffix_ids = self._ids(form.content_suffix)
        if video.text_first:
            video_ids, text_ids = self._ids(rest + video_text), []
        else:
            video_ids, text_ids = self._ids(video_text), self._ids(rest)
        text_ids += suffix_ids
        return [("video", video_ids)] + text_ids, [len(video_ids)] + [1] * len(text_ids)

    def encode_item(self, item: Item, with_images: bool = True) -> Encoded:
        """The item's token ids (image slots expanded), its images, its own length, truncation."""
        form = self.profile.side(item.is_query)
        head, _, tail = form.prompt(CONTENT, item.instruction).partition(CONTENT)
        head_ids, tail_ids = self._ids(head), self._ids(tail)
        open_ids, close_ids = self._markup()
        units, costs = (self._video_units if self._as_video(item) else self._image_units)(item, form)
        own = len(head_ids) + sum(costs) + len(tail_ids)
        budget = self.window - len(head_ids) - len(tail_ids)
        if budget < 1:
            raise ModelError(f"{self.spec}: the window ({self.window}) is shorter than the prompt template")
        kept, truncated = truncate_middle(units, costs, budget)
        ids, kept_images, videos = list(head_ids), [], []
        for unit in kept:
            if isinstance(unit, tuple) and unit[0] == "video":
                ids += unit[1]
                videos.append(self._clip(item) if with_images else None)
            elif isinstance(unit, tuple):
                ids += open_ids + [self.image_token_id] * unit[2] + close_ids
                kept_images.append(prepared_image(item.images[unit[1]], self.profile.images) if with_images else None)
            else:
                ids.append(unit)
        return Encoded(ids + tail_ids, kept_images, own, truncated, videos)

    def _clip(self, item: Item):
        return qwen_vision.clip_pixels(list(item.images), self.profile.images.factor, self.profile.video)

    # ---- the model ------------------------------------------------------------------------------
    def _hidden(self, input_ids, attention, pixel_values, grid, video=None):
        model = self.model
        if self.profile.positions == "sequential":
            # GME / RzenEmbed: the language model on input embeddings, images spliced in, 1-D positions
            embeds = model.get_input_embeddings()(input_ids)
            if pixel_values is not None:
                vision = model.visual(pixel_values.type(model.visual.dtype), grid_thw=grid)
                image_embeds = getattr(vision, "pooler_output", vision)
                embeds[input_ids == self.image_token_id] = image_embeds.to(embeds.dtype)
            return model.language_model(inputs_embeds=embeds, attention_mask=attention).last_hidden_state
        inputs = {"input_ids": input_ids, "attention_mask": attention}
        if pixel_values is not None:
            inputs.update(pixel_values=pixel_values, image_grid_thw=grid)
        if video is not None:
            inputs.update(pixel_values_videos=video[0], video_grid_thw=video[1])
        if pixel_values is not None or video is not None:  # the processor's types: text 0, image 1, video 2
            inputs["mm_token_type_ids"] = ((input_ids == self.image_token_id).long()
                                           + 2 * (input_ids == self.video_token_id).long())
        return model(**inputs).last_hidden_state

    def _video_parts(self, clips) -> list:
        """Each clip's (patches, grid) as the model's video processor makes them."""
        if not clips:
            return []
        if self._video_settings is None:
            self._video_settings = qwen_vision.processor_settings(self._source, **self._load_kwargs)
        return [qwen_vision.video_patches(clip, self._video_settings) for clip in clips]

    # ---- the two halves of a call (harness.scoring.embedding) ------------------------------------
    prepares_in_workers = True  # tokenising, images and frames: the heavy half, in loader workers

    def assemble(self, item: Item):
        """The item as the call takes it (``_payload``) and where its vector is read."""
        encoded = self.encode_item(item)
        form = self.profile.side(item.is_query)
        if form.pooling not in ("last", "mean"):
            raise ModelError(f"{self.spec}: pooling {form.pooling!r} is not in the scoring path yet")
        # right padding: the last real token (the suffix / EOS / <emb> token), or the mean over the real ones
        read_at = len(encoded.ids) - 1 - len(self._ids(form.after_pooled))
        payload = {**self._payload(encoded), "pooling": form.pooling, "read_at": read_at}
        return payload, len(encoded.ids), encoded.truncated

    def _payload(self, encoded: Encoded) -> dict:
        """Token ids, the images' pixel patches and grids (the image processor's, one input at a time exactly
        as over a batch), and each clip's patches."""
        pixels = grid = None
        if encoded.images:
            vision = self.image_processor(images=encoded.images, return_tensors="pt")
            pixels, grid = vision["pixel_values"], vision["image_grid_thw"]
        # ids as an array: a loader worker hands it back as one buffer, not as a list of Python ints
        return {"ids": np.asarray(encoded.ids, dtype=np.int64), "pixels": pixels, "grid": grid,
                "videos": self._video_parts(encoded.videos)}

    def _forward(self, encoded: list[Encoded]):
        """The last hidden states [n, width, hidden] (the model's dtype) of encoded inputs, right-padded."""
        return self._batch_hidden([self._payload(e) for e in encoded])

    def _batch_hidden(self, inputs: list[dict]):
        """One call: the inputs right-padded into one batch, their images and clips concatenated in order."""
        torch = self.torch
        width = max(len(x["ids"]) for x in inputs)
        device = self.settings.device
        input_ids = torch.full((len(inputs), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(inputs), width), dtype=torch.long)
        for row, x in enumerate(inputs):  # right padding
            input_ids[row, : len(x["ids"])] = torch.from_numpy(x["ids"])
            attention[row, : len(x["ids"])] = 1
        input_ids, attention = input_ids.to(device), attention.to(device)
        with_images = [x for x in inputs if x["pixels"] is not None]
        pixels = torch.cat([x["pixels"] for x in with_images]).to(device) if with_images else None
        grid = torch.cat([x["grid"] for x in with_images]).to(device) if with_images else None
        clips = [part for x in inputs for part in x["videos"]]
        video = ((torch.cat([patches for patches, _ in clips]).to(device),
                  torch.tensor([g for _, g in clips], device=device)) if clips else None)
        with torch.no_grad():
            return self._hidden(input_ids, attention, pixels, grid, video)

    def preparer_state(self) -> dict:
        return {"frame_sequences": self.frame_sequences}

    def forward_prepared(self, prepared):
        inputs = [p.payload for p in prepared]
        hidden = self._batch_hidden(inputs).float()
        vectors = [hidden[row, x["read_at"]] if x["pooling"] == "last" else hidden[row, : len(x["ids"])].mean(dim=0)
                   for row, x in enumerate(inputs)]
        return self.torch.stack(vectors).cpu().numpy(), [p.truncated for p in prepared]

    def activation_bytes_per_token(self) -> float | None:
        if self.model is None:  # the driver of several devices: each computes its own
            return None
        config = self.model.config
        text = getattr(config, "text_config", config)
        hidden, mlp = text.hidden_size, getattr(text, "intermediate_size", 4 * text.hidden_size)
        element = next(self.model.parameters()).element_size()
        # an image token's fp32 pixel patches: merge^2 patches of 3 x temporal x patch^2 values (18.8 KB for Qwen2-VL)
        processor = self.image_processor
        patch, temporal = getattr(processor, "patch_size", 14), getattr(processor, "temporal_patch_size", 2)
        pixels = getattr(processor, "merge_size", 2) ** 2 * 3 * temporal * patch * patch * 4
        # a padded call's attention mask, as transformers builds it for SDPA: one byte per token pair, up to a
        # window's worth per token; on CPU the attention scores are materialised too (fp32, per head)
        mask = self.window * (1 + (4 * text.num_attention_heads if self.settings.device == "cpu" else 0))
        # one layer's live activations (harness.scoring.batching), the fp32 last hidden state read for pooling
        return (6 * hidden + 3 * mlp) * element + 4 * hidden + pixels + mask

    # ---- the model's own count (issue 26 point 3) -----------------------------------------------
    def own_lengths(self, pool) -> dict:
        """Per side: the inputs' lengths in the model's own tokens (template included) beside the
        benchmark's yardstick, and how many were over the window (and lost their middle)."""
        sides = {}
        for side, batches, yardstick in (("queries", pool.iter_queries(64), pool.query_tokens),
                                         ("candidates", pool.iter_candidates(64), pool.candidate_tokens)):
            counts = [self.own_count(self.format_query(i) if side == "queries" else self.format_candidate(i))
                      for batch in batches for i in batch]
            sides[side] = _length_summary([n for n, _ in counts], yardstick, sum(t for _, t in counts))
        return {"window": self.window, "image_cell_px": self.profile.images.factor, **sides}

    def own_count(self, item: Item) -> tuple[int, bool]:
        """The item's length in the model's own tokens (template included), and whether it lost its middle."""
        encoded = self.encode_item(item, with_images=False)
        return encoded.own_tokens, encoded.truncated

    def format_candidate(self, item: Item) -> Item:
        """Candidates are handed the pool's task instruction: the profile's document form decides
        whether it reaches the model (for every profile here it does not)."""
        return Item(id=item.id, text=item.text, images=item.images, instruction=self._pool_instruction)

    def begin_pool(self, pool) -> None:
        self._pool_instruction = next(iter(pool.iter_queries(1)))[0].instruction
        self.frame_sequences = pool.info.frame_sequences

    def score_pool(self, pool, cache, settings):
        self.begin_pool(pool)  # also for the multi-vector profiles, whose scoring is their own
        stats = super().score_pool(pool, cache, settings)
        stats.details["own_lengths"] = self.own_lengths(pool)
        if self.profile.verified is None:
            stats.notes.append(f"profile unverified: {self.profile.unverified_reason}")
        if pool.info.frame_sequences and self.profile.frames == "video":
            video = self.profile.video
            stats.notes.append(f"frame sequences fed as the model's video input (at most {video.max_frames} frames, "
                               f"{video.total_pixels} pixels, timestamps at "
                               + (f"{video.fps_over_frames:g} / frames fps)" if video.fps_over_frames
                                  else f"{video.timestamp_fps:g} fps)"))
        return stats

    def format_query(self, item: Item) -> Item:
        """The profile places the instruction itself (encode_item): the query stays as it is."""
        return Item(id=item.id, text=item.text, images=item.images, instruction=item.instruction, is_query=True)


def _length_summary(own: list[int], yardstick: list[int], over_window: int) -> dict:
    own_array, yard = np.asarray(own, dtype=np.int64), np.asarray(yardstick, dtype=np.int64)
    return {"n": len(own), "own_mean": round(float(own_array.mean()), 1) if own else None,
            "own_max": int(own_array.max()) if own else None,
            "yardstick_mean": round(float(yard.mean()), 1) if len(yard) else None,
            "ratio": round(float(own_array.mean() / yard.mean()), 3) if own and len(yard) and yard.mean() else None,
            "over_window": int(over_window)}
