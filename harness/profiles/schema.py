"""The model profiles' schema, the fact groups each profile must source, and the pieces the family modules'
entries share.

Every dataclass is frozen and keyword-only: an entry names each of its fields, and an unknown field, a
missing required one or a positional argument is refused when the entry is built. Which fact groups a
profile states, and so must name a source for, is ``source_faults``'s rule, checked when the
catalogue loads (harness/profiles/catalogue.py).
"""

from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass

MTEB = "embeddings-benchmark/mteb"
MTEB_RELEASE = "2.26.24 (PyPI release)"  # the installed mteb whose wrappers were read and run
WRAPPERS = "mteb/models/model_implementations/"

CHAT = ("<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n")
QWEN_VISION = "<|vision_start|><|image_pad|><|vision_end|>"  # the processor repeats <|image_pad|> per visual token
DEFAULT_SYSTEM = "You are a helpful assistant."
END_OF_TEXT = "<|endoftext|>"
UNPINNED = "unpinned"  # the revision of a Hub repo that could not be read: there is no revision to source


class ProfileError(ValueError):
    """A profile (or the catalogue) that breaks the schema's rules."""


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where a fact is stated: a repository, a path in it, the commit (or release) read."""

    repo: str
    path: str
    commit: str

    def __str__(self) -> str:
        return f"{self.repo}:{self.path}@{self.commit}"


@dataclass(frozen=True, kw_only=True)
class SideForm:
    """How one side (queries or documents) is fed: the whole prompt, where the instruction goes,
    the pooling and the normalisation.

    ``template`` holds ``{instruction}`` (the pool's task instruction, or ``default_instruction``
    where the pool gives none) and ``{content}`` (the item's text, each image at its placeholder as
    the profile's ``image_markup``)."""

    template: str
    # where the instruction goes ("system prompt", "user turn, after the leading images", ...); "none", or
    # "none (what the side gets instead)": the side takes no instruction
    instruction_place: str
    pooling: str = "last"  # "last" (the last real token: EOS / suffix token), "mean", "multi_vector"
    normalise: bool = True
    default_instruction: str = ""
    instruction_end: str = ""  # appended to an instruction that does not end in punctuation (GME, Qwen3-VL: ".")
    # RzenEmbed: the instruction opens the text, after the item's leading images (its code writes
    # images, then instruction + text, into the user turn)
    instruction_after_leading_images: bool = False
    # multi-vector, as colpali_engine's models run in mteb (ColPaliEngineWrapper.encode): the item's text
    # (image placeholders removed) is one input in ``template``; each image is an input of its own in
    # this template (``{content}``: the image markup); the token matrices are concatenated, text first
    image_template: str = ""
    # Embed-RL: the instruction and the text are joined by this (its UVRB eval: "{prompt} {text}")
    instruction_joiner: str = ""
    # Embed-RL: a fixed text after the item's content, in the same user turn ("Summarize the above content
    # in one word:"): part of the content so that it is tokenized with the text before it, as the chat
    # template's output is (".Sum" is one token)
    content_suffix: str = ""
    # Embed-RL: the template's text after the pooled token (its `<emb>`, then "<|im_end|>\n"): in the input
    # the model reads, but the pooled state (causal attention) is the one before it
    after_pooled: str = ""
    # VLM2Vec: put between an item's leading images and the words after them (its model card writes
    # f"{image_token} {instruction} {text}": " Represent" is then one token, as in the official input)
    after_leading_images: str = ""

    def _instruction(self, instruction: str) -> str:
        instruction = (instruction or "").strip() or self.default_instruction
        if self.instruction_end and instruction and not _ends_in_punctuation(instruction):
            instruction += self.instruction_end
        return instruction

    def prompt(self, content: str, instruction: str) -> str:
        """The whole prompt around ``content``. A document's template has no ``{instruction}``: a
        document is embedded without the task instruction even when it is handed one."""
        if self.instruction_after_leading_images:
            return self.template.replace("{content}", content)
        return self.template.replace("{instruction}", self._instruction(instruction)).replace("{content}", content)

    def content(self, text: str, instruction: str, placeholder: str) -> str:
        """The item's text, with the instruction placed in it where the form says so."""
        if not (self.instruction_after_leading_images or self.after_leading_images):
            return text + self.content_suffix
        leading = 0
        while text.startswith(placeholder, leading * len(placeholder)):
            leading += 1
        cut = leading * len(placeholder)
        words = text[cut:]
        if self.instruction_after_leading_images:
            placed = self._instruction(instruction)
            words = placed + self.instruction_joiner + words if placed and words else placed + words
        if cut and words:
            words = self.after_leading_images + words
        return text[:cut] + words + self.content_suffix


def _ends_in_punctuation(text: str) -> bool:
    return unicodedata.category(text[-1]).startswith("P")


@dataclass(frozen=True, kw_only=True)
class ImageLimits:
    """The model's image budget: the processor resizes each image to whole ``factor`` x ``factor``
    cells (patch size x spatial merge) with a pixel count in [min_pixels, max_pixels]; one cell is one
    visual token (28 px for Qwen2-VL and Qwen2.5-VL, 32 px for Qwen3-VL)."""

    patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    # GME and RzenEmbed first snap each image to 28-px cells within [4, 16384] cells (their fetch_image,
    # a copy of qwen_vl_utils'), then hand it to the processor: (min_pixels, max_pixels) of that step
    pre_resize: tuple[int, int] | None = None

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size


@dataclass(frozen=True, kw_only=True)
class VideoInput:
    """How a model's own code feeds an ordered frame sequence as its video input
    (harness/models/qwen_vision.py): the frame cap, the clip's pixel budget, and the frame rate its timestamps
    assume for a frame list."""

    max_frames: int
    total_pixels: int
    timestamp_fps: float
    # each frame's pixel bounds in qwen-vl-utils' fetch_image (None: its defaults, 4..16384 cells)
    frame_pixels: tuple[int, int] | None = None
    # > 0: the timestamps' rate is this over the sequence's frame count (Embed-RL's UVRB eval: 8 x 8 / frames)
    fps_over_frames: float = 0.0
    text_first: bool = False  # the item's text before the video (Embed-RL) or after it (Qwen3-VL-Embedding)

    def fps(self, n_frames: int) -> float:
        """The rate the prompt's timestamps assume for a sequence of `n_frames` frames."""
        return self.fps_over_frames / n_frames if self.fps_over_frames > 0 else self.timestamp_fps


@dataclass(frozen=True, kw_only=True)
class TrainingData:
    """A source dataset the authors declare training on, and where they say so (issue 26 point 8)."""

    dataset: str
    stated_in: Source


@dataclass(frozen=True, kw_only=True)
class Verification:
    """A side-by-side check: the reference run, and the max abs difference measured in fp32."""

    reference: str
    max_abs_diff: float
    test: str = "tests/harness/profiles/test_profiles_side_by_side.py"


@dataclass(frozen=True, kw_only=True)
class ModelProfile:
    name: str  # the --model name (lower case of the paper's name)
    paper_name: str  # as Table 2 cites it ("" if the paper does not evaluate it)
    repo: str  # Hub repo (or the API's model id)
    revision: str  # the commit read, or UNPINNED
    family: str  # architecture: "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "api"
    window: int  # tokens
    dim: int
    dtype: str  # the authors' inference dtype
    size: str
    query: SideForm | None
    document: SideForm | None
    images: ImageLimits | None
    frames: str  # how an ordered frame sequence is fed: "images" (in order) or "video" (then `video` says how)
    positions: str  # "mrope" (the model's own 3-D rope index) or "sequential" (LLM run on embeddings, 1-D)
    sources: dict[str, Source]  # fact group (FACT_GROUPS) or a further reference read -> where it is stated
    image_markup: str = QWEN_VISION
    video: VideoInput | None = None
    added_tokens: tuple[str, ...] = ()  # added to the tokenizer where it lacks them (Embed-RL: "<emb>")
    group: str = "Open-Source / Local Models"
    runnable: bool = True  # False: facts only; `--model NAME` is refused with unverified_reason
    verified: Verification | None = None
    unverified_reason: str = ""
    training_data: tuple[TrainingData, ...] = ()
    notes: tuple[str, ...] = ()
    # Table 2's embedding dim where it differs from the model's own (``dim``, what the checkpoint
    # gives); `mmle models` marks it (a test checks it against the paper's Table 2)
    paper_dim: int | None = None

    def side(self, is_query: bool) -> SideForm:
        return self.query if is_query else self.document

    @property
    def status(self) -> str:
        if self.verified is not None:
            return f"verified against {self.verified.reference} (max |diff| {self.verified.max_abs_diff:.1e})"
        return f"unverified: {self.unverified_reason}"

    def as_dict(self) -> dict:
        record = asdict(self)
        record["sources"] = {k: str(v) for k, v in self.sources.items()}
        record["training_data"] = [{"dataset": t.dataset, "stated_in": str(t.stated_in)} for t in self.training_data]
        record["status"] = self.status
        return record


# ---- The fact groups: fact group -> the `sources` keys any one of which states it. An API's wrapper
# ("api") states how the API is called: every group but the paper's name; the model card ("card") or
# the authors' README ("architecture") states the architecture family and the size.
FACT_GROUPS: dict[str, tuple[str, ...]] = {
    "paper_name": ("paper_name",),
    "prompt": ("prompt", "api"),  # the side forms' templates and instruction places, the added tokens
    "pooling": ("pooling", "api"),  # the side forms' pooling and normalisation
    "images": ("images", "api"),
    "frames": ("frames", "api"),  # `frames`, and `video` where it is set
    "revision": ("revision", "api"),
    "dim_window_dtype": ("dim_window_dtype", "api"),
    "architecture": ("card", "architecture", "api"),  # `family` and `size`
}


def stated_fact_groups(profile: ModelProfile) -> list[str]:
    """The fact groups the profile states: a group whose fields are empty ("" paper name, no image
    limits, no side forms, an unpinned revision) states nothing and needs no source."""
    no_forms = profile.query is None and profile.document is None
    absent = {"paper_name": not profile.paper_name, "prompt": no_forms, "pooling": no_forms,
              "images": profile.images is None, "revision": profile.revision == UNPINNED}
    return [group for group in FACT_GROUPS if not absent.get(group, False)]


def source_faults(profile: ModelProfile) -> list[str]:
    """What the profile's `sources` lacks: a source for each fact group it states, and its model card
    read at the repo and revision the profile runs (a card at another revision states other facts)."""
    faults = [f"no source for its {group} facts (`sources` needs one of: {', '.join(FACT_GROUPS[group])})"
              for group in stated_fact_groups(profile)
              if not any(key in profile.sources for key in FACT_GROUPS[group])]
    card = profile.sources.get("card")
    if card is not None and (card.repo, card.commit) != (profile.repo, profile.revision):
        faults.append(f"its model card source {card} is not its repo at its revision "
                      f"({profile.repo}@{profile.revision})")
    if "api" in profile.sources and profile.family != "api":
        faults.append("an `api` source stands for an API's facts; its family is not `api`")
    return faults


FRAME_INPUTS = ("images", "video")
POSITION_SCHEMES = ("mrope", "sequential", "api")


def value_faults(profile: ModelProfile) -> list[str]:
    """Fields whose value the runner would not know what to do with."""
    faults = [f"{field} {value!r} is not one of {', '.join(known)}"
              for field, value, known in (("frames", profile.frames, FRAME_INPUTS),
                                          ("positions", profile.positions, POSITION_SCHEMES))
              if value not in known]
    if profile.frames == "video" and profile.video is None:
        faults.append("frames 'video' needs `video` (how its frames are fed)")
    if profile.window <= 0 or profile.dim <= 0:
        faults.append("its window and dimension are positive numbers of tokens and values")
    return faults


# ---- Pieces the family modules' entries share.

def mteb_wrapper(file: str) -> Source:
    """An mteb model wrapper, as the installed release holds it."""
    return Source(repo=MTEB, path=WRAPPERS + file, commit=MTEB_RELEASE)


def model_card(repo: str, revision: str) -> Source:
    return Source(repo=repo, path="README.md", commit=revision)


def paper_tables(tables: str = "Table 2 and Table 5") -> Source:
    """The paper's tables, as the design notes copy them: where a profile's paper name is stated."""
    return Source(repo="mmlongembed", path="../shared/design/paper-tables.md", commit=tables)


def chat_prompt(system: str, end: str = "") -> str:
    """The Qwen chat template with `system` as the system turn, the item's content as the user turn,
    then `end` after the assistant turn's opening."""
    return CHAT.replace("{system}", system).replace("{user}", "{content}") + end


def qwen2_limits(min_tokens: int, max_tokens: int, pre_resize: bool = False) -> ImageLimits:
    """Qwen2-VL's and Qwen2.5-VL's image budget in 28-px cells (patch 14 x merge 2); `pre_resize`: the
    [4, 16384]-cell snap GME's and RzenEmbed's fetch_image apply first."""
    return ImageLimits(patch_size=14, merge_size=2, min_pixels=min_tokens * 28 * 28, max_pixels=max_tokens * 28 * 28,
                       pre_resize=(4 * 28 * 28, 16384 * 28 * 28) if pre_resize else None)


def wrapper_facts(wrapper: Source, card: Source, **extra: Source) -> dict[str, Source]:
    """The usual split: the prompt, pooling, image and frame facts from the wrapper; the repo,
    revision, dimension and window from the wrapper's ModelMeta and the model card; `extra` adds
    sources or replaces the wrapper's for a group."""
    return {"prompt": wrapper, "pooling": wrapper, "images": wrapper, "frames": wrapper,
            "revision": wrapper, "dim_window_dtype": wrapper, "card": card, "paper_name": paper_tables(), **extra}


def trained_on(names: tuple[str, ...], where: Source) -> tuple[TrainingData, ...]:
    """Training datasets all declared in one place."""
    return tuple(TrainingData(dataset=name, stated_in=where) for name in names)
