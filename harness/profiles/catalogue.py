"""One declarative profile per model of the paper (Table 2), plus jina-embeddings-v4, ColQwen2.5 and
the Doubao-Seed-1.6 API: how its authors run it, and where each fact is stated.

A profile is data (like mteb's ``ModelMeta``); ``harness.models.profile_model`` runs it. Every fact group
names its source (a repository, a path in it and the commit or release read). ``verified`` says
which reference the profile was checked against side by side (tests/harness/profiles/test_profiles_side_by_side.py,
gate: max abs difference <= 1e-5 in fp32 on tiny random models of the real architecture) or why
it was not; results of an unverified profile carry that reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mmlongembed.core.errors import UserError

MTEB = "embeddings-benchmark/mteb"
MTEB_RELEASE = "2.26.24 (PyPI release)"  # the installed mteb whose wrappers were read and run
WRAPPERS = "mteb/models/model_implementations/"
PAPER = "the paper's Table 2 and Table 5 (../shared/design/paper-tables.md)"

CHAT = ("<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n")
QWEN_VISION = "<|vision_start|><|image_pad|><|vision_end|>"  # the processor repeats <|image_pad|> per visual token
DEFAULT_SYSTEM = "You are a helpful assistant."


@dataclass(frozen=True)
class Source:
    """Where a fact is stated: a repository, a path in it, the commit (or release) read."""

    repo: str
    path: str
    commit: str

    def __str__(self) -> str:
        return f"{self.repo}:{self.path}@{self.commit}"


@dataclass(frozen=True)
class SideForm:
    """How one side (queries or documents) is fed: the whole prompt, where the instruction goes,
    the pooling and the normalisation.

    ``template`` holds ``{instruction}`` (the pool's task instruction, or ``default_instruction``
    where the pool gives none) and ``{content}`` (the item's text, each image at its placeholder as
    the profile's ``image_markup``)."""

    template: str
    instruction_place: str  # "system prompt", "user turn prefix", "none"
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
    import unicodedata

    return unicodedata.category(text[-1]).startswith("P")


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TrainingData:
    """A source dataset the authors declare training on, and where they say so (issue 26 point 8)."""

    dataset: str
    stated_in: Source


@dataclass(frozen=True)
class Verification:
    """A side-by-side check: the reference run, and the max abs difference measured in fp32."""

    reference: str
    max_abs_diff: float
    test: str = "tests/harness/profiles/test_profiles_side_by_side.py"


@dataclass(frozen=True)
class ModelProfile:
    name: str  # the --model name (lower case of the paper's name)
    paper_name: str  # as Table 2 cites it ("" if the paper does not evaluate it)
    repo: str  # Hub repo (or the API's model id)
    revision: str
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
    sources: dict[str, Source]  # fact group -> where it is stated
    image_markup: str = QWEN_VISION
    video: VideoInput | None = None
    added_tokens: tuple[str, ...] = ()  # added to the tokenizer where it lacks them (Embed-RL: "<emb>")
    group: str = "Open-Source / Local Models"
    runnable: bool = True  # False: facts only; `--model NAME` is refused with unverified_reason
    verified: Verification | None = None
    unverified_reason: str = ""
    training_data: tuple[TrainingData, ...] = ()
    notes: tuple[str, ...] = ()

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


def _mteb(file: str) -> Source:
    return Source(MTEB, WRAPPERS + file, MTEB_RELEASE)


def _card(repo: str, revision: str) -> Source:
    return Source(repo, "README.md", revision)


def _qwen2_limits(min_tokens: int, max_tokens: int, pre_resize: bool = False) -> ImageLimits:
    return ImageLimits(patch_size=14, merge_size=2, min_pixels=min_tokens * 28 * 28, max_pixels=max_tokens * 28 * 28,
                       pre_resize=(4 * 28 * 28, 16384 * 28 * 28) if pre_resize else None)


def _facts(wrapper: Source, card: Source, **extra: Source) -> dict[str, Source]:
    """The usual split: the prompt, pooling, image and frame facts from the wrapper; the repo,
    revision, dimension and window from the wrapper's ModelMeta and the model card."""
    return {"prompt": wrapper, "pooling": wrapper, "images": wrapper, "frames": wrapper,
            "revision": wrapper, "dim_window_dtype": wrapper, "card": card, "paper_name": Source(
                "mmlongembed", "../shared/design/paper-tables.md", "Table 2 and Table 5"), **extra}


def _trained(names: tuple[str, ...], where: Source) -> tuple[TrainingData, ...]:
    return tuple(TrainingData(n, where) for n in names)


# ---- GME (Qwen2-VL): system prompt = instruction for queries, the default system prompt for
# documents; image before text; the LLM run on input embeddings (1-D positions); <|endoftext|> suffix
# and its state as the embedding. gme_v_models.py: Encoder.embed / forward, GmeQwen2VL.encode.
_GME_Q = SideForm(CHAT.replace("{system}", "{instruction}").replace("{user}", "{content}") + "<|endoftext|>",
                  "system prompt", default_instruction=DEFAULT_SYSTEM, instruction_end=".")
_GME_D = SideForm(CHAT.replace("{system}", DEFAULT_SYSTEM).replace("{user}", "{content}") + "<|endoftext|>", "none")
_GME_SOURCE = _mteb("gme_v_models.py")
_GME_TRAINING = ("MSMARCO", "NQ", "HotpotQA", "FEVER", "TriviaQA", "SQuAD", "AllNLI", "ImageNet", "LAION",
                 "MSCOCO", "Docmatix", "M-BEIR")
_GME_VERIFIED = Verification("mteb's GME Encoder.embed (gme_v_models.py) on a tiny Qwen2-VL", 3.0e-8)

# ---- Ops-MM-embedding-v1 (Qwen2-VL): system prompt = instruction (both sides; documents get the
# default), images before text, full model forward (mrope), left padding, last position.
_OPS_FORM = SideForm(CHAT.replace("{system}", "{instruction}").replace("{user}", "{content}") + "<|endoftext|>",
                     "system prompt", default_instruction=DEFAULT_SYSTEM)
_OPS_D = SideForm(CHAT.replace("{system}", DEFAULT_SYSTEM).replace("{user}", "{content}") + "<|endoftext|>", "none")
_OPS_SOURCE = _mteb("ops_mm_models.py")

# ---- RzenEmbed (Qwen2-VL): fixed system prompt; the instruction prefixes the user turn with no
# separator; the LLM run on input embeddings; right padding, last real token.
_RZEN_Q = SideForm(CHAT.replace("{system}", DEFAULT_SYSTEM).replace("{user}", "{content}") + "<|endoftext|>",
                   "user turn, after the leading images", instruction_after_leading_images=True)
_RZEN_D = SideForm(CHAT.replace("{system}", DEFAULT_SYSTEM).replace("{user}", "{content}") + "<|endoftext|>", "none")
_RZEN_SOURCE = _mteb("rzen_embed_model.py")

# ---- VLM2Vec-Qwen2VL-2B (a LoRA on Qwen2-VL-2B-Instruct), as its official code runs it (TIGER-AI-Lab/VLM2Vec,
# branch v1, the code of the model card's example examples/qwen2vl/demo-qwen2vl-2b.py): no chat template, each
# image a bare <|image_pad|> (no vision start/end), the text f"{image tokens} {instruction} {text}"; the whole
# model's forward, whose rope index finds images by <|vision_start|> and so, finding none, gives every token
# 1-D positions (its modeling_qwen2_vl.py get_rope_index): "sequential"; the last real token's final state
# (MMEBModel._pooling 'last'), L2-normalised;
# load_processor's min_pixels/max_pixels arguments (256..1280 cells) do not reach the image processor, so
# Qwen2-VL-2B-Instruct's own bounds decide: 4..16384 cells of 28 px.
_VLM2VEC_Q = SideForm("{content}", "text, after the leading images, space-joined (no chat template)",
                      instruction_after_leading_images=True, instruction_joiner=" ", after_leading_images=" ")
_VLM2VEC_D = SideForm("{content}", "none", after_leading_images=" ")
_VLM2VEC_SOURCE = _mteb("vlm2vec_models.py")
_VLM2VEC_REPO, _VLM2VEC_COMMIT = "TIGER-AI-Lab/VLM2Vec", "28fdbdd68a66374ec1b53207ad7a24b9979f1ab6"  # branch v1
_VLM2VEC_DEMO = Source(_VLM2VEC_REPO, "examples/qwen2vl/demo-qwen2vl-2b.py", _VLM2VEC_COMMIT)
_VLM2VEC_MODEL = Source(_VLM2VEC_REPO, "src/model.py", _VLM2VEC_COMMIT)
_VLM2VEC_UTILS = Source(_VLM2VEC_REPO, "src/model_utils.py", _VLM2VEC_COMMIT)
_VLM2VEC_ROPE = Source(_VLM2VEC_REPO, "src/vlm_backbone/qwen2_vl/modeling_qwen2_vl.py", _VLM2VEC_COMMIT)
_VLM2VEC_VERIFIED = Verification(
    f"the official MMEBModel, load_processor and Qwen2_VL_process_fn ({_VLM2VEC_REPO}@{_VLM2VEC_COMMIT[:12]}, "
    "branch v1, under its transformers 4.46.3) on a tiny Qwen2-VL, golden vectors tests/golden/vlm2vec.json",
    9.0e-8, "tests/harness/profiles/test_profiles_vlm2vec.py")
_VLM2VEC_NOTES = (
    "the official code has no frame or video input (v1 is images only): a frame sequence is fed as its images "
    "in order, each a bare <|image_pad|>, as the official processor takes an image list",
    "the official eval (eval.py) first resizes every image to 1344 x 1344 (its image_resolution 'high' default); "
    "the model card's example feeds images as they are, as this profile does",
    "MMEB's image candidates carry 'Represent the given image.'; the model card's text candidate is bare, as "
    "documents are here; images inside the text (not leading) stay at their placeholders, with no space added",
    "the official code truncates nowhere by default (max_len None); this benchmark's rule is the paper's: the "
    "32768-token window, middle dropped")

# ---- Qwen3-VL-Embedding: system prompt = instruction ("Represent the user's input." by default),
# "." appended; images before the text; 32-px cells within [4, 1800] cells; the whole model's forward
# (mrope), right padding, the last real token. A frame list is a video: at most 64 frames, 10 x 768
# tokens' pixels in all, stamped at qwen-vl-utils' 2 fps (fps 1 applies to video files only).
_QWEN3_Q = SideForm(CHAT.replace("{system}", "{instruction}").replace("{user}", "{content}"), "system prompt",
                    default_instruction="Represent the user's input.", instruction_end=".")
_QWEN3_D = SideForm(CHAT.replace("{system}", "Represent the user's input.").replace("{user}", "{content}"), "none")
_QWEN3_SOURCE = _mteb("qwen3_vl_embedding_models.py")
_QWEN3_VIDEO = VideoInput(max_frames=64, total_pixels=10 * 768 * 32 * 32, timestamp_fps=2.0)
_QWEN3_SCRIPT = Source("Qwen/Qwen3-VL-Embedding-2B", "scripts/qwen3_vl_embedding.py", "9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda")
# the official embedder (Qwen3VLEmbedder): the prompt, pooling, image and frame facts, and the reference
# the profile is checked against (its golden vectors: tests/golden/qwen3_vl.json)
_QWEN3_OFFICIAL = Source("QwenLM/Qwen3-VL-Embedding", "src/models/qwen3_vl_embedding.py",
                         "8ce3aab1fbcc7b7143b094f0b2005dd89e7246b9")
_QWEN3_VERIFIED = Verification(f"the official Qwen3VLEmbedder ({_QWEN3_OFFICIAL}) on a tiny Qwen3-VL, "
                               "golden vectors tests/golden/qwen3_vl.json", 6.0e-8, "tests/harness/profiles/test_profiles_qwen3_vl.py")

# ---- ColQwen2.5 (colpali_engine, multi-vector), as mteb's ColQwen2_5Wrapper runs it (colpali_models.py,
# ColPaliEngineWrapper): text, on either side (its get_text_embeddings serves queries and text documents),
# is "Query: " + text + 10 x <|endoftext|> (colpali's query augmentation token), no chat template; each
# image is an input of its own in colpali's visual prompt; a text-and-image item is the text's tokens then
# the image's. Every token's 128-d projection (custom_text_proj), L2-normalised; MaxSim.
_COLQWEN_FORM = SideForm("Query: {content}" + "<|endoftext|>" * 10,
                         "none (prefix 'Query: ', 10 <|endoftext|> augmentation tokens)", pooling="multi_vector",
                         image_template="<|im_start|>user\n{content}Describe the image.<|im_end|><|endoftext|>")
_COLPALI = "illuin-tech/colpali"
_COLPALI_RELEASE = "v0.3.18 (PyPI colpali-engine 0.3.18)"

# ---- jina-embeddings-v4: custom modelling code (trust_remote_code) in the Hub repo, not reachable here.
_JINA_UNVERIFIED = (
    "not runnable: its modelling code (modeling_jina_embeddings_v4.py, its own qwen2_5_vl.py and "
    "custom_lora_module.py: the retrieval LoRA as a multi-task adapter layer, task_label threaded through every "
    "layer) is only in the Hub repo jinaai/jina-embeddings-v4, not reachable here; mteb's jina_models.py "
    "loads it with trust_remote_code; no public GitHub copy from Jina was found (QuaduxIT/jina-embeddings-v4 "
    "and Mazyod/jina-embeddings-v4-vllm-plugin hold none); onlylrs/SmartEmbed (a third-party training "
    "project) holds copies written for transformers 4.x (installed: 5.24), not run")
_JINA_CODE = Source("onlylrs/SmartEmbed", "jina/models/modeling_jina_embeddings_v4.py",
                    "567ec80313c3df293b77deb2350f4d685599d4f7")

# ---- Embed-RL (Qwen3-VL-2B / -4B, the Embedder): Qwen3-VL's chat format with no system turn; the user
# turn holds the image (before the text) or the text then the frame list (as the video input), the
# instruction prefixing the text with a space, then "Summarize the above content in one word:"; an
# assistant turn "<emb>" (an added token) whose state is the embedding, L2-normalised; images snapped to
# 32-px cells within [128, 768] cells (qwen-vl-utils, patch 16); 8 frames at [128, 768] cells each.
_EMBED_RL_REPO, _EMBED_RL_COMMIT = "ZoengHN/Embed-RL", "87b52f735d75140207851982d1a8a7dcf77005c4"
_EMBED_RL_UVRB = Source(_EMBED_RL_REPO, "eval/uvrb_eval/uvrb_dataset.py", _EMBED_RL_COMMIT)
_EMBED_RL_EVAL = Source(_EMBED_RL_REPO, "eval/uvrb_eval/eval_uvrb_recall.py", _EMBED_RL_COMMIT)
_EMBED_RL_TOY = Source(_EMBED_RL_REPO, "eval/toy_eval/image_eval.py", _EMBED_RL_COMMIT)
_EMBED_RL_MMEB = Source(_EMBED_RL_REPO, "eval/mmeb_eval/vlm2vec/src/model/processor.py", _EMBED_RL_COMMIT)
_EMBED_RL_README = Source(_EMBED_RL_REPO, "README.md", _EMBED_RL_COMMIT)
# their contrastive training sets (the MMEB-train subsets with the Reasoner's CoT, LLaVA-Hound video, ViDoRe and
# VisRAG samples): train/contrastive_learning/train_script/qwen3vl{2b,4b}/weight_train_data_config.yaml (the same)
_EMBED_RL_TRAINING = ("MMEB-train", "A-OKVQA", "CIRR", "ChartQA", "DocVQA", "ImageNet-1K", "InfographicsVQA", "MSCOCO",
                      "NIGHTS", "OK-VQA", "SUN397", "VisDial", "Visual7W", "VisualNews", "WebQA", "LLaVA-Hound",
                      "ViDoRe", "VisRAG")
_EMBED_RL_TURNS = ("<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n<emb><|im_end|>\n")
_EMBED_RL_SUFFIX = "Summarize the above content in one word:"
_EMBED_RL_Q = SideForm(_EMBED_RL_TURNS, "user turn, before the text (after a leading image), space-joined",
                       instruction_after_leading_images=True, instruction_joiner=" ", content_suffix=_EMBED_RL_SUFFIX,
                       after_pooled="<|im_end|>\n")
_EMBED_RL_D = SideForm(_EMBED_RL_TURNS, "none", content_suffix=_EMBED_RL_SUFFIX, after_pooled="<|im_end|>\n")
_EMBED_RL_IMAGES = ImageLimits(16, 2, 64 * 32 * 32, 16384 * 32 * 32, pre_resize=(128 * 32 * 32, 768 * 32 * 32))
_EMBED_RL_VIDEO = VideoInput(max_frames=8, total_pixels=768 * 32 * 32 * 8, timestamp_fps=2.0,
                             frame_pixels=(128 * 32 * 32, 768 * 32 * 32), fps_over_frames=8 * 8.0, text_first=True)
_EMBED_RL_VERIFIED = Verification(
    f"the official UVRB eval ({_EMBED_RL_UVRB.path}, {_EMBED_RL_EVAL.path} @{_EMBED_RL_COMMIT[:12]}) on a tiny "
    "Qwen3-VL with <emb>, golden vectors tests/golden/embed_rl.json", 1.5e-7, "tests/harness/profiles/test_profiles_embed_rl.py")
_EMBED_RL_NOTES = (
    "Embed-RL is reasoning-driven: its Reasoner writes a traceability CoT offline (data_pipe/eval_cot_generate) "
    "that the official evaluations append to the Embedder's input (eval/mmeb_eval processor.py: "
    "process_cot_with_visual_content; the UVRB script's --concat_query_cot/--concat_corpus_cot); this harness "
    "runs the Embedder alone, without CoT, as the official code does for an input without one, so its scores "
    "are not the paper's protocol",
    "frames: the model's video input as the official UVRB eval feeds a frame list: the item's text first, at "
    "most 8 frames evenly spaced, each at 128..768 cells of 32 px, timestamps at 8 x 8 / (frames) fps",
    "several images in one item: the official code has no such input (MMEB's processor takes an image list as "
    "frames: text first, then each image); an item's images stay at their placeholders here, not checked",
    "the official code strips the text and cuts it at 512 characters (toy eval) or the UVRB configs' 8192 "
    "characters and a "
    "text-only input at 8192 tokens; this benchmark's rule is the paper's: the 32768-token window, middle dropped",
    "the Hub repos' revisions could not be read here (no Hub access): unpinned")


def _profiles() -> list[ModelProfile]:
    gme2 = ModelProfile(
        "gme-qwen2-vl-2b", "GME-Qwen2-VL-2B", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct",
        "ce765ae71b8cdb208203cd8fb64a170b1b84293a", "qwen2_vl", 32768, 1536, "float16", "2B",
        _GME_Q, _GME_D, _qwen2_limits(4, 1280, True), "images", "sequential",
        _facts(_GME_SOURCE, _card("Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", "ce765ae71b8cdb208203cd8fb64a170b1b84293a"),
               official=Source("Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", "gme_inference.py",
                               "ce765ae71b8cdb208203cd8fb64a170b1b84293a")),
        verified=_GME_VERIFIED, training_data=_trained(_GME_TRAINING, _GME_SOURCE),
        notes=("mteb truncates at 1800 tokens (its default max_length); this benchmark's rule is the paper's: "
               "the 32768-token window, middle dropped",
               "the official code takes one image, before the text; interleaved items keep each image at its "
               "placeholder and frames go in as images in order (the video path is commented out upstream)"))
    gme7 = ModelProfile(
        "gme-qwen2-vl-7b", "GME-Qwen2-VL-7B", "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct",
        "477027a6480f8630363be77751f169cc3434b673", "qwen2_vl", 32768, 3584, "float16", "8B",
        _GME_Q, _GME_D, _qwen2_limits(4, 1280, True), "images", "sequential",
        _facts(_GME_SOURCE, _card("Alibaba-NLP/gme-Qwen2-VL-7B-Instruct", "477027a6480f8630363be77751f169cc3434b673")),
        verified=_GME_VERIFIED, training_data=_trained(_GME_TRAINING, _GME_SOURCE), notes=gme2.notes)
    rzen = ModelProfile(
        "rzen-v2-7b", "Rzen-v2-7B", "qihoo360/RzenEmbed", "ea95c339008f9639420fcb33ba2ba606ea94be78",
        "qwen2_vl", 32768, 3584, "bfloat16", "8B", _RZEN_Q, _RZEN_D, _qwen2_limits(256, 1280, True), "images",
        "sequential", _facts(_RZEN_SOURCE, _card("qihoo360/RzenEmbed", "ea95c339008f9639420fcb33ba2ba606ea94be78")),
        verified=Verification("mteb's RzenEmbedWrapper (rzen_embed_model.py) on a tiny Qwen2-VL", 3.0e-8),
        training_data=_trained(("MSMARCO", "NQ", "HotpotQA", "FEVER", "MMEB-train", "mmE5-synthetic", "VideoChat-Flash"),
                               _RZEN_SOURCE),
        notes=("frames: 8 evenly spaced frames as images at 160-180 visual tokens each (mteb's video processor); "
               "a frame pool's frames are fed as images at the image limits", "mteb truncates at 2000 tokens"))
    ops = [ModelProfile(
        f"ops-mm-v1-{size.lower()}", f"Ops-MM-v1-{size}", f"OpenSearch-AI/Ops-MM-embedding-v1-{size}", revision,
        "qwen2_vl", 32768, dim, "bfloat16", "8B" if size == "7B" else size, _OPS_FORM, _OPS_D,
        _qwen2_limits(256, 1280), "images", "mrope",
        _facts(_OPS_SOURCE, _card(f"OpenSearch-AI/Ops-MM-embedding-v1-{size}", revision)),
        verified=Verification("mteb's OpsMMEmbeddingWrapper.embed_batch (ops_mm_models.py) on a tiny Qwen2-VL",
                              3.0e-8),
        notes=(("Table 2 gives 2048 dimensions; mteb's ModelMeta 1536 (the Qwen2-VL-2B hidden size)",)
               if size == "2B" else ()))
        for size, revision, dim in (("2B", "69c23ac5595bb7fb3a9959df96fe155b3650c01e", 1536),
                                    ("7B", "e9179f601f9bf21d2fd20136c11eb4ae2ea42859", 3584))]
    embed_rl = [ModelProfile(
        f"embed-rl-{size.lower()}", f"Embed-RL-{size}", f"ZoengHouNaam/Embed-RL-{size}", "unpinned", "qwen3_vl",
        32768, dim, "bfloat16", size, _EMBED_RL_Q, _EMBED_RL_D, _EMBED_RL_IMAGES, "video", "mrope",
        {"paper_name": Source("mmlongembed", "../shared/design/paper-tables.md", "Table 2 and Table 5"),
         "architecture": _EMBED_RL_README, "prompt": _EMBED_RL_UVRB, "prompt_image_eval": _EMBED_RL_TOY,
         "pooling": _EMBED_RL_EVAL, "images": _EMBED_RL_TOY, "frames": _EMBED_RL_UVRB, "cot": _EMBED_RL_MMEB,
         "dim_window_dtype": _EMBED_RL_EVAL},
        video=_EMBED_RL_VIDEO, added_tokens=("<emb>",), verified=_EMBED_RL_VERIFIED,
        training_data=_trained(_EMBED_RL_TRAINING, Source(
            _EMBED_RL_REPO,
            f"train/contrastive_learning/train_script/qwen3vl{size.lower()}/weight_train_data_config.yaml",
            _EMBED_RL_COMMIT)),
        notes=(*_EMBED_RL_NOTES, *extra))
        for size, dim, extra in (
            ("2B", 2048, ("dimension: 2048, Qwen3-VL-2B's hidden size (the <emb> state is the last hidden "
                          "state, no projection); the paper's Table 2 gives 1536",)),
            ("4B", 2560, ("dimension: 2560, Qwen3-VL-4B's hidden size, as Table 2 gives",)))]
    vlm2vec = ModelProfile(
        "vlm2vec-qwen2vl-2b", "VLM2Vec-Qwen2VL-2B", "TIGER-Lab/VLM2Vec-Qwen2VL-2B", "7717dee", "qwen2_vl", 32768,
        1536, "bfloat16", "2B", _VLM2VEC_Q, _VLM2VEC_D, _qwen2_limits(4, 16384), "images", "sequential",
        _facts(_VLM2VEC_SOURCE, _card("TIGER-Lab/VLM2Vec-Qwen2VL-2B", "7717dee"), prompt=_VLM2VEC_DEMO,
               pooling=_VLM2VEC_MODEL, images=_VLM2VEC_UTILS, frames=_VLM2VEC_UTILS, positions=_VLM2VEC_ROPE,
               official=_VLM2VEC_DEMO),
        image_markup="<|image_pad|>", verified=_VLM2VEC_VERIFIED, notes=_VLM2VEC_NOTES,
        training_data=_trained(("MMEB-train",), _card("TIGER-Lab/VLM2Vec-Qwen2VL-2B", "7717dee")))
    qwen3 = [ModelProfile(
        f"qwen3-vl-{size.lower()}", f"Qwen3-VL-{size}", f"Qwen/Qwen3-VL-Embedding-{size}", revision, "qwen3_vl",
        32768, dim, "bfloat16", size, _QWEN3_Q, _QWEN3_D, ImageLimits(16, 2, 4 * 32 * 32, 1800 * 32 * 32), "video",
        "mrope", _facts(_QWEN3_SOURCE, _card(f"Qwen/Qwen3-VL-Embedding-{size}", revision), prompt=_QWEN3_OFFICIAL,
                        pooling=_QWEN3_OFFICIAL, images=_QWEN3_OFFICIAL, frames=_QWEN3_OFFICIAL, official=_QWEN3_SCRIPT),
        video=_QWEN3_VIDEO, verified=_QWEN3_VERIFIED,
        notes=("frames: the model's video input as the official code feeds a frame list: at most 64 frames, "
               "10 x 768 tokens' pixels in all, timestamps at 2 fps (its fps 1 is for video files); a "
               "frame-sequence pool's own grid rate (1 fps) cannot be passed to it",
               "the official code truncates at 8192 tokens, keeping the head; this benchmark's rule is the "
               "paper's: the 32768-token window, middle dropped",
               "the official code puts every image before the text; an item's images stay at their "
               "placeholders here (the side-by-side inputs lead with their images)"))
        for size, revision, dim in (("2B", "9f2f7e710d6d81056aa5c0a4f04764fec6bb7bda", 2048),
                                    ("8B", "2c4565515e0f265c6511776e7193b22c0968ddc7", 4096))]
    jina = ModelProfile(
        "jina-embeddings-v4", "", "jinaai/jina-embeddings-v4", "4a58ca57710c49f51896e4bc820e202fbf64904b",
        "qwen2_5_vl", 32768, 2048, "bfloat16", "3.8B",
        SideForm("Query: {content}", "none (retrieval adapter, prefix 'Query: ')", pooling="mean"),
        SideForm("Passage: {content}", "none (retrieval adapter, prefix 'Passage: ')", pooling="mean"),
        _qwen2_limits(4, 1280), "images", "mrope",
        _facts(_mteb("jina_models.py"), _card("jinaai/jina-embeddings-v4", "4a58ca57710c49f51896e4bc820e202fbf64904b"),
               modelling_code_read=_JINA_CODE),
        group="Other", runnable=False, unverified_reason=_JINA_UNVERIFIED,
        training_data=_trained(("MSMARCO", "NQ", "STS12", "SICK-R", "CodeSearchNet"), _mteb("jina_models.py")),
        notes=("read in a third-party copy of the modelling file (" + str(_JINA_CODE) + "), not run: an image input is "
               "'<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|>Describe the image.<|im_end|>\\n' "
               "and its single vector the mean over the image span only (vision start to end), a text's the mean "
               "over all its tokens; this profile's forms follow mteb's text prefixes and are not yet those",))
    colqwen = ModelProfile(
        "colqwen2.5", "", "vidore/colqwen2.5-v0.2", "6f6fcdfd1a114dfe365f529701b33d66b9349014", "qwen2_5_vl",
        128000, 128, "bfloat16", "3B", _COLQWEN_FORM, _COLQWEN_FORM, _qwen2_limits(4, 768), "images", "mrope",
        {**_facts(_mteb("colpali_models.py"),
                  _card("vidore/colqwen2.5-v0.2", "6f6fcdfd1a114dfe365f529701b33d66b9349014")),
         "revision": _mteb("colqwen_models.py"), "dim_window_dtype": _mteb("colqwen_models.py"),
         "prompt_tokens": Source(_COLPALI, "colpali_engine/models/qwen2_5/colqwen2_5/processing_colqwen2_5.py",
                                 _COLPALI_RELEASE),
         "pooling": Source(_COLPALI, "colpali_engine/models/qwen2_5/colqwen2_5/modeling_colqwen2_5.py",
                           _COLPALI_RELEASE)},
        group="Other",
        verified=Verification("mteb's ColQwen2_5Wrapper (colqwen_models.py, colpali_engine 0.3.18's ColQwen2_5) "
                              "on a tiny ColQwen2.5", 6.0e-8),
        training_data=_trained(("vidore/colpali_train_set",), _mteb("colqwen_models.py")),
        notes=("the Hub repo is a LoRA adapter on vidore/colqwen2.5-base: merge it into the base "
               "(peft's merge_and_unload) and give the merged directory with --model-path colqwen2.5=DIR",
               "mteb embeds a document's text like a query's ('Query: ' prefix and augmentation tokens) and "
               "each image in colpali's visual prompt; frames are images, one input each, concatenated in order "
               "(MaxSim itself ignores their order)",
               "window: mteb's max_tokens (128000); each input (the text, each image) is its own sequence"))
    doubao = ModelProfile(
        "doubao-seed-1.6", "Doubao-Seed-1.6", "doubao-embedding-vision-251215", "1", "api", 131072, 2048, "api", "",
        SideForm("Target_modality:Text.\n Instruction:{instruction}\n Query:{content}", "API instruction field"),
        SideForm("Instruction: Compress the text into one word.\n Query:{content}", "API instruction field"),
        None, "images", "api", {"api": _mteb("seed_1_6_embedding_models_1215.py"),
                                "paper_name": Source("mmlongembed", "../shared/design/paper-tables.md", "Table 5")},
        image_markup="", group="Proprietary Models",
        unverified_reason=("an API: no weights to run side by side; its adapter (harness/models/doubao_model.py) is "
                           "tested against a loopback server that speaks the request and response shapes of mteb's "
                           "wrapper"),
        notes=("documents with images use 'Compress the text and image into one word.'; image-only "
               "'Compress the image into one word.' (mteb)",
               "`--model doubao-seed-1.6` runs the adapter at https://ark.cn-beijing.volces.com/api/v3 "
               "(/embeddings/multimodal; `doubao:<model>@<base_url>` for another endpoint), key from ARK_API_KEY "
               "or VOLCES_AUTH_TOKEN"))
    return [*qwen3, gme2, gme7, rzen, *ops, *embed_rl, vlm2vec, jina, colqwen, doubao]


PROFILES: dict[str, ModelProfile] = {p.name: p for p in _profiles()}


def get_profile(name: str) -> ModelProfile:
    profile = PROFILES.get(name.strip().lower())
    if profile is None:
        raise UserError(f"no model profile {name!r}; `mmle models` lists them: {', '.join(PROFILES)}")
    return profile
