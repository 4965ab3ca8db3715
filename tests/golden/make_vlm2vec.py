"""Write the VLM2Vec-Qwen2VL-2B golden vectors (tests/golden/vlm2vec.json) with the official inference code.

    python -m tests.golden.make_vlm2vec --official CHECKOUT --official-python PYTHON [--commit v1] [--out FILE]

CHECKOUT is a clone of TIGER-AI-Lab/VLM2Vec (a work tree or a bare git directory; nothing of it is copied
into this repository). The checkpoint's code is the `v1` branch (the model card's example,
examples/qwen2vl/demo-qwen2vl-2b.py: MMEBModel, load_processor, pooling 'last', normalize); its `src/`
is exported to a temporary directory at the commit given. The official code vendors Qwen2-VL's modelling
and processing code written for transformers 4.46.3 (its requirements.txt), which does not import under
transformers 5: PYTHON is an interpreter with transformers==4.46.3, tokenizers 0.20 and huggingface-hub
0.26 (docs/MODELS.md), which runs the official part in a child process.

This process builds the tiny model (tests/golden/vlm2vec.py) and its fingerprints; the child loads the
same weights with the official Qwen2VLForConditionalGeneration (a 4.46 config written from the tiny one:
the same sizes, flat as 4.46 reads them; Qwen2-VL-2B-Instruct's preprocessor_config.json, 4..16384
cells), the official load_processor (its min_pixels/max_pixels arguments do not reach the image
processor), Qwen2_VL_process_fn and MMEBModel(pooling='last', normalize=True) as MMEBModel.load builds it
around the merged model, in fp32 with SDPA attention (the official code asks for flash-attention 2 and
bf16, which the CPU lacks), one input at a time. No LoRA: MMEBModel.load merges the adapter
(merge_and_unload) before inference, so a merged model is what the official code runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden import vlm2vec as golden
from tests.golden.common import golden_parser, write_goldens

OFFICIAL_REPO = "TIGER-AI-Lab/VLM2Vec"
PATHS = ["src/model.py", "src/model_utils.py", "src/vlm_backbone/qwen2_vl/modeling_qwen2_vl.py",
         "src/vlm_backbone/qwen2_vl/processing_qwen2_vl.py", "src/vlm_backbone/qwen2_vl/image_processing_qwen2_vl.py",
         "examples/qwen2vl/demo-qwen2vl-2b.py"]


def official_source(checkout: Path, commit: str, workdir: Path) -> tuple[str, dict[str, str]]:
    """`src/` at `commit` exported under `workdir`; the resolved commit and the sha256 of PATHS."""
    git = ["git", "-C", str(checkout)]
    resolved = subprocess.run(git + ["rev-parse", f"{commit}^{{commit}}"], capture_output=True, text=True,
                              check=True).stdout.strip()
    archive = subprocess.run(git + ["archive", resolved, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive, check=True)
    digests = {path: hashlib.sha256(subprocess.run(git + ["show", f"{resolved}:{path}"], capture_output=True,
                                                   check=True).stdout).hexdigest() for path in PATHS}
    return resolved, digests


def _config_for_4_46(directory: Path) -> dict:
    """The tiny model's config as transformers 4.46 reads a Qwen2-VL config (text sizes at the top)."""
    config = json.loads((directory / "config.json").read_text())
    text = {k: v for k, v in config.pop("text_config").items()
            if k not in ("model_type", "layer_types", "rope_parameters", "dtype")}
    rope = config.get("rope_parameters") or json.loads((directory / "config.json").read_text())["text_config"][
        "rope_parameters"]
    vision = {k: v for k, v in config.pop("vision_config").items() if k not in ("rope_parameters",)}
    return {**{k: v for k, v in config.items() if k not in ("dtype", "transformers_version")}, **text,
            "rope_theta": rope["rope_theta"], "rope_scaling": {"type": "mrope", "mrope_section": rope["mrope_section"]},
            "vision_config": vision, "torch_dtype": "float32"}


def _preprocessor_for_4_46() -> dict:
    """Qwen/Qwen2-VL-2B-Instruct's preprocessor_config.json as that release reads it."""
    return {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
            "image_processor_type": "Qwen2VLImageProcessor", "min_pixels": golden.PROCESSOR_PIXELS[0],
            "max_pixels": golden.PROCESSOR_PIXELS[1], "merge_size": 2, "patch_size": 14,
            "processor_class": "Qwen2VLProcessor", "resample": 3, "rescale_factor": 1 / 255, "temporal_patch_size": 2}


def run_official(official: Path, directory: Path) -> dict:
    """In the child (transformers 4.46.3): the official model, processor, inputs, pooling, per input."""
    import io

    import torch
    from PIL import Image

    sys.path.insert(0, str(official))
    from src.model import MMEBModel
    from src.model_utils import QWEN2_VL, Qwen2_VL_process_fn, backbone2model, load_processor
    from transformers import AutoConfig

    (directory / "config.json").write_text(json.dumps(_config_for_4_46(directory), indent=1))
    (directory / "preprocessor_config.json").write_text(json.dumps(_preprocessor_for_4_46(), indent=1))
    config = AutoConfig.from_pretrained(str(directory))
    config._attn_implementation = "sdpa"
    encoder = backbone2model[QWEN2_VL].from_pretrained(str(directory), config=config, torch_dtype=torch.float32)
    model = MMEBModel(encoder=encoder.eval(), pooling="last", normalize=True).eval()
    model_args = argparse.Namespace(processor_name=None, model_name=str(directory), model_backbone=QWEN2_VL)
    processor = load_processor(model_args)
    result = {}
    for side, instruction in golden.SIDES.items():
        vectors, ids = [], []
        for item in golden.inputs():
            images = [Image.open(io.BytesIO(data)) for data in item["images"]]
            image = None if not images else images[0] if len(images) == 1 else images
            text = golden.official_text(item["text"], instruction)
            batch = Qwen2_VL_process_fn({"text": [text], "image": [image]}, processor)
            batch.pop("texts"), batch.pop("images")
            with torch.no_grad():
                reps = model(qry=batch)["qry_reps"] if side == "queries" else model(tgt=batch)["tgt_reps"]
            vectors.append(reps[0].tolist())
            ids.append(batch["input_ids"][0].tolist())
        result[side] = {"vectors": vectors, "input_ids": ids, "texts": [golden.official_text(i["text"], instruction)
                                                                          for i in golden.inputs()]}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = golden_parser(__doc__.splitlines()[0], OFFICIAL_REPO, golden.GOLDEN_FILE, default_commit="v1",
                           official_required=False)  # not in the child process
    parser.add_argument("--official-python", default=sys.executable,
                        help="an interpreter with transformers==4.46.3 (the official code's pin) for the official part")
    parser.add_argument("--child", nargs=3, metavar=("OFFICIAL_SRC", "TINY", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # the same reduction order on every machine
    if args.child:
        official, tiny, out = map(Path, args.child)
        out.write_text(json.dumps(run_official(official, tiny)))
        return 0
    if args.official is None:
        parser.error("--official is required")
    import transformers

    with tempfile.TemporaryDirectory(prefix="vlm2vec-golden-") as work:
        work = Path(work)
        (work / "official").mkdir()
        commit, digests = official_source(args.official.resolve(), args.commit, work / "official")
        tiny = golden.make_tiny_vlm2vec(work / "tiny")
        weights = golden.weights_summary(tiny)
        subprocess.run([args.official_python, "-m", "tests.golden.make_vlm2vec", "--child", str(work / "official"),
                        str(tiny), str(work / "runs.json")], check=True)
        runs = json.loads((work / "runs.json").read_text())
        ran_with = subprocess.run([args.official_python, "-c", "import transformers, torch; "
                                   "print(transformers.__version__, torch.__version__)"],
                                  capture_output=True, text=True, check=True).stdout.split()
    write_goldens(args.out, golden, {"repo": OFFICIAL_REPO, "paths": PATHS, "commit": commit, "ref": args.commit,
                                     "sha256": digests},
                  {"transformers": ran_with[0], "torch": ran_with[1], "tiny_built_with": transformers.__version__},
                  weights, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
