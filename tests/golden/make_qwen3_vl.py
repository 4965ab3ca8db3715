"""Write the Qwen3-VL golden vectors (tests/golden/qwen3_vl.json) with the official inference code.

    python -m tests.golden.make_qwen3_vl --official CHECKOUT [--out FILE]

CHECKOUT is a clone of QwenLM/Qwen3-VL-Embedding (a work tree or a bare git directory; nothing of it
is copied here). Its embedder class `Qwen3VLEmbedder` (src/models/qwen3_vl_embedding.py) runs, as it
is, on the suite's tiny random Qwen3-VL in fp32, on the inputs of tests/golden/qwen3_vl.py; the file
written records the repository, path and commit run, the sha256 of the file run, and the fingerprints
of the tiny weights and the inputs. It needs `qwen-vl-utils` and `torchvision` (the official code's
own requirements) importable, which the suite does not.

Shims, each outside the official code's logic:
- the tiny model directory lacks two processor files the Hub repos ship: a chat template (the
  Qwen3-VL chat format, as the official vLLM notebook prints it: system turn, user turn with each
  image or video as <|vision_start|><|image_pad|>/<|video_pad|><|vision_end|> then the text,
  generation prompt) and the video processor's config (Qwen3VLVideoProcessor's defaults: 16-px
  patches, temporal patch 2, merge 2). Both are written into the tiny directory before the
  embedder loads it;
- transformers 5's Qwen3VLProcessor expands only the <|video_pad|> of the template's
  <|vision_start|><|video_pad|><|vision_end|>, so the template's own markers end up around the
  per-frame blocks, which carry theirs ("<0.2 seconds><|vision_start|>...<|vision_end|>"): the
  official code's transformers (>= 4.57.3, its pyproject.toml) replaced the wrapped placeholder
  whole. `video_placeholder_as_in_transformers_4` hands the processor the text 4.57 expanded;
- where torchvision's compiled operators cannot load (a CUDA wheel beside a CPU torch), its
  pure-Python package is imported without its `__init__` (which registers those operators): the
  official code and transformers use only its transforms (resize, normalize), which are plain torch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from tests.golden import qwen3_vl as golden
from tests.golden.common import golden_parser, write_goldens

OFFICIAL_REPO = "QwenLM/Qwen3-VL-Embedding"
OFFICIAL_PATH = "src/models/qwen3_vl_embedding.py"
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message.role + '\\n' -}}"
    "{%- if message.content is string -%}{{- message.content -}}{%- else -%}"
    "{%- for item in message.content -%}"
    "{%- if item.type == 'image' or 'image' in item -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif item.type == 'video' or 'video' in item -%}{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in item -%}{{- item.text -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")


def official_source(checkout: Path, commit: str, workdir: Path) -> tuple[Path, str]:
    """The official embedder file and the commit it is at: from a work tree, or read out of a bare
    git directory at `commit`."""
    git = ["git", "-C", str(checkout)]
    resolved = subprocess.run(git + ["rev-parse", commit], capture_output=True, text=True, check=True).stdout.strip()
    if (checkout / OFFICIAL_PATH).is_file():
        if subprocess.run(git + ["status", "--porcelain", "--", OFFICIAL_PATH], capture_output=True,
                          text=True, check=True).stdout.strip():
            sys.exit(f"{checkout / OFFICIAL_PATH} has local changes: goldens must come from a commit")
        return checkout / OFFICIAL_PATH, resolved
    text = subprocess.run(git + ["show", f"{resolved}:{OFFICIAL_PATH}"], capture_output=True, check=True).stdout
    file = workdir / "qwen3_vl_embedding.py"
    file.write_bytes(text)
    return file, resolved


def torchvision_transforms_only() -> None:
    """Import torchvision's pure-Python package without its __init__ when its operators cannot load."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - a CUDA build's operators fail to register in many ways
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        spec = importlib.util.find_spec("torchvision")
        if spec is None:
            sys.exit("torchvision is not installed (the official code needs it): pip install torchvision")
        package = types.ModuleType("torchvision")
        package.__path__, package.__spec__ = list(spec.submodule_search_locations), spec
        package.__version__ = _distribution_version("torchvision")
        sys.modules["torchvision"] = package


def _distribution_version(name: str) -> str:
    from importlib.metadata import version

    return version(name).split("+")[0]


VIDEO_PLACEHOLDER = "<|vision_start|><|video_pad|><|vision_end|>"


def video_placeholder_as_in_transformers_4() -> None:
    """transformers 4.57's Qwen3VLProcessor replaced the template's wrapped video placeholder by the
    per-frame blocks; 5's replaces the bare <|video_pad|> inside it. Collapse the wrapper first."""
    from transformers import Qwen3VLProcessor

    call = Qwen3VLProcessor.__call__

    def __call__(self, *args, text=None, **kwargs):
        if text is not None:
            text = [t.replace(VIDEO_PLACEHOLDER, "<|video_pad|>") for t in ([text] if isinstance(text, str) else text)]
        return call(self, *args, text=text, **kwargs)

    Qwen3VLProcessor.__call__ = __call__


def add_processor_files(directory: Path) -> None:
    from transformers import Qwen3VLVideoProcessor

    (directory / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    Qwen3VLVideoProcessor(patch_size=16, temporal_patch_size=2, merge_size=2).save_pretrained(directory)


def official_input(item: dict, instruction: str) -> dict:
    """The official embedder's input: images (all before the text), or the frames as a video."""
    import io

    from PIL import Image

    pictures = [Image.open(io.BytesIO(b)).convert("RGB") for b in item["images"]]
    text = item["text"].replace(golden.PLACEHOLDER, "")
    record = {"text": text or None, "instruction": instruction or None}
    if item["kind"] == "frames":
        record["video"] = pictures
    elif pictures:
        record["image"] = pictures
    return record


def run_official(file: Path, directory: Path) -> dict:
    import torch

    spec = importlib.util.spec_from_file_location("qwen3_vl_embedding_official", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    embedder = module.Qwen3VLEmbedder(str(directory), dtype=torch.float32)
    result = {}
    for side, instruction in golden.SIDES.items():
        vectors, ids = [], []
        for item in golden.inputs():
            record = official_input(item, instruction)
            conversation = embedder.format_model_input(**record)
            ids.append(embedder._preprocess_inputs([conversation])["input_ids"][0].tolist())
            vectors.append(embedder.process([record])[0].tolist())
        result[side] = {"vectors": vectors, "input_ids": ids}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = golden_parser(__doc__.splitlines()[0], OFFICIAL_REPO, golden.GOLDEN_FILE)
    args = parser.parse_args(argv)
    torchvision_transforms_only()
    video_placeholder_as_in_transformers_4()
    import torch
    import transformers

    torch.set_num_threads(1)  # the same reduction order on every machine
    with tempfile.TemporaryDirectory(prefix="qwen3-vl-golden-") as work:
        work = Path(work)
        file, commit = official_source(args.official.resolve(), args.commit, work)
        file_sha256 = hashlib.sha256(file.read_bytes()).hexdigest()
        directory = golden.make_tiny_qwen3_vl(work / "tiny")
        weights = golden.weights_summary(directory)
        add_processor_files(directory)
        runs = run_official(file, directory)
    write_goldens(args.out, golden, {"repo": OFFICIAL_REPO, "path": OFFICIAL_PATH, "commit": commit, "sha256": file_sha256},
                  {"transformers": transformers.__version__, "torch": torch.__version__,
                   "qwen_vl_utils": _distribution_version("qwen-vl-utils"),
                   "torchvision": _distribution_version("torchvision")}, weights, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
