"""Write the Embed-RL golden vectors (tests/golden/embed_rl.json) with the official inference code.

    python -m tests.golden.make_embed_rl --official CHECKOUT [--commit REV] [--out FILE]

CHECKOUT is a clone of ZoengHN/Embed-RL (a work tree or a bare git directory; nothing of it is copied
here). The official UVRB evaluation runs, as it is, on the tiny Embed-RL of tests/golden/embed_rl.py in
fp32: eval/uvrb_eval/uvrb_dataset.py builds each input's messages (UVRBQueryDataset for queries, with
the dataset's prompt before the text; UVRBCandidateDataset for a frame-list candidate; their shared
`_prepare_messages` for text and image documents, which the UVRB corpora, videos only, never hold),
eval/uvrb_eval/eval_uvrb_recall.py's collators turn them into model inputs (qwen-vl-utils'
process_vision_info, the processor), and its forward, `get_embedding_reps` (the last `<emb>` token's
state) and normalisation are main()'s, one input at a time. The file written records the repository,
paths and commit run, each file's sha256, and the fingerprints of the tiny weights and the inputs. It
needs `qwen-vl-utils` and `torchvision` (the official code's own requirements) importable.

main() itself is not called: it loads the model in bf16 under accelerate's bf16 autocast (the
goldens are fp32) and its corpus is videos only. Shims, each outside the official code's logic:
- `_prepare_messages` imports its pixel constants from `collators.qwen2_vision_process`, a module the
  repository does not hold; the repository's own train/contrastive_learning/dataset/qwen2_vision_process.py
  (the training's resize constants: 128..768 cells of 32 px for images) is put at that name;
- the tiny directory gets the chat template and the video processor config the Hub repos ship
  (tests/golden/make_qwen3_vl.py's, the Qwen3-VL chat format; the video config with the checkpoints'
  bounds, 4096..25165824 pixels per clip: the class defaults are smaller and the collators resize), and
  transformers 5's video placeholder is handed to the processor as transformers 4.57 expanded it
  (make_qwen3_vl's shim);
- torchvision without its compiled operators where they cannot load (make_qwen3_vl's shim).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import tempfile
from pathlib import Path

from tests.golden import embed_rl as golden
from tests.golden.common import golden_parser, write_goldens
from tests.golden.make_qwen3_vl import (_distribution_version, add_processor_files, torchvision_transforms_only,
                                        video_placeholder_as_in_transformers_4)

OFFICIAL_REPO = "ZoengHN/Embed-RL"
DATASET_FILE = "eval/uvrb_eval/uvrb_dataset.py"
EVAL_FILE = "eval/uvrb_eval/eval_uvrb_recall.py"
# the module uvrb_dataset.py imports its constants from (absent upstream) <- the repository's own file
CONSTANTS_SHIM = ("eval/collators/qwen2_vision_process.py",
                  "train/contrastive_learning/dataset/qwen2_vision_process.py")
MAX_TEXT_LENGTH = 8192  # the UVRB configs' max_text_length (eval/uvrb_eval/eval_uvrb_config/*.yaml)
NUM_VIDEO_FRAMES = 8  # the UVRB configs' num_video_frames
# Qwen3-VL checkpoints' video_preprocessor_config.json "size" (pixels over all frames of a clip)
VIDEO_PROCESSOR_SIZE = {"shortest_edge": 4096, "longest_edge": 25165824}


def official_files(checkout: Path, commit: str, workdir: Path) -> tuple[str, dict[str, str]]:
    """The official files at `commit` written under `workdir` at their repository paths (the constants
    module also at the path uvrb_dataset.py imports it from); the resolved commit and each file's sha256."""
    git = ["git", "-C", str(checkout)]
    resolved = subprocess.run(git + ["rev-parse", commit], capture_output=True, text=True, check=True).stdout.strip()
    digests = {}
    for target, path in ((DATASET_FILE, DATASET_FILE), (EVAL_FILE, EVAL_FILE), CONSTANTS_SHIM):
        text = subprocess.run(git + ["show", f"{resolved}:{path}"], capture_output=True, check=True).stdout
        (workdir / target).parent.mkdir(parents=True, exist_ok=True)
        (workdir / target).write_bytes(text)
        digests[path] = hashlib.sha256(text).hexdigest()
    return resolved, digests


def checkpoint_video_bounds(directory: Path) -> None:
    """The video processor's pixel bounds as Qwen3-VL checkpoints ship them (Embed-RL's merge script saves
    the base model's processor): the class defaults are smaller, and the UVRB collators call the
    processor with do_resize=True, so with them an 8-frame clip would be shrunk a second time."""
    file = directory / "video_preprocessor_config.json"
    config = json.loads(file.read_text())
    config["size"] = dict(VIDEO_PROCESSOR_SIZE)
    file.write_text(json.dumps(config, indent=2) + "\n")


def _module(name: str, file: Path):
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_inputs(data: Path) -> tuple[list[dict], dict[str, str]]:
    """The inputs on disk as the UVRB eval reads them: images under data/images, a frame list as a
    directory of frames under data/frames/<video stem>. Returns the query records and image paths."""
    (data / "images").mkdir(parents=True)
    records, image_paths = [], {}
    for k, item in enumerate(golden.inputs()):
        text = item["text"].replace(golden.PLACEHOLDER, "")
        record = {"id": item["kind"], **({"text": text} if text else {})}
        if item["kind"].endswith("frames"):
            frames = data / "frames" / f"clip{k}"
            frames.mkdir(parents=True)
            for i, frame in enumerate(item["images"]):
                (frames / f"{i:04d}.png").write_bytes(frame)
            record["video"] = f"clip{k}.mp4"
        elif item["images"]:
            (image,) = item["images"]
            (data / "images" / f"{k}.png").write_bytes(image)
            record["image"], image_paths[item["kind"]] = f"{k}.png", str(data / "images" / f"{k}.png")
        records.append(record)
    return records, image_paths


def messages_per_side(dataset_module, data: Path) -> dict[str, list]:
    """Each input's messages as the official UVRB datasets build them, queries and documents."""
    records, image_paths = write_inputs(data)
    queries_file = data / "queries.jsonl"
    queries_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    queries = dataset_module.UVRBQueryDataset(str(queries_file), MAX_TEXT_LENGTH, golden.DATASET, str(data / "frames"),
                                              NUM_VIDEO_FRAMES, str(data / "images"), use_query_prompt=True)
    documents = []
    for record in records:
        if "video" in record:
            corpus = data / f"corpus-{record['id']}.jsonl"
            corpus.write_text(json.dumps({"id": record["id"], "video": record["video"]}) + "\n")
            documents.append(dataset_module.UVRBCandidateDataset(str(corpus), str(data / "frames"), NUM_VIDEO_FRAMES,
                                                                 MAX_TEXT_LENGTH, golden.DATASET)[0][0])
        else:
            fields = {"text": record.get("text", "")}
            if record["id"] in image_paths:
                fields["image_path"] = image_paths[record["id"]]
            documents.append(dataset_module.UVRBBase(MAX_TEXT_LENGTH)._prepare_messages(fields))
    return {"queries": [queries[i][0] for i in range(len(queries))], "documents": documents}


def run_official(eval_module, messages: dict[str, list], directory: Path) -> dict:
    """main()'s model, processor, `<emb>` id, collators, forward, pooling and normalisation, in fp32."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoProcessor, Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration.from_pretrained(str(directory), dtype=torch.float32,
                                                            local_files_only=True).eval()
    processor = AutoProcessor.from_pretrained(str(directory), local_files_only=True)
    emb_token_id = model.config.emb_token_ids[0]
    collators = {"queries": eval_module.UVRBQueryCollator(processor, max_length=MAX_TEXT_LENGTH),
                 "documents": eval_module.UVRBCandidateCollator(processor, max_length=MAX_TEXT_LENGTH)}
    result = {}
    for side, side_messages in messages.items():
        vectors, ids = [], []
        for kind, conversation in zip((item["kind"] for item in golden.inputs()), side_messages):
            batch = collators[side]([(conversation, kind)])
            batch.pop("qids" if side == "queries" else "dids")
            with torch.no_grad():
                hidden = model.model(**batch, return_dict=True).last_hidden_state
            vector = F.normalize(eval_module.get_embedding_reps(hidden, batch["input_ids"], emb_token_id), dim=-1)
            vectors.append(vector[0].tolist())
            ids.append(batch["input_ids"][0].tolist())
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
    with tempfile.TemporaryDirectory(prefix="embed-rl-golden-") as work:
        work = Path(work)
        commit, digests = official_files(args.official.resolve(), args.commit, work / "official")
        dataset_module = _module("uvrb_dataset_official", work / "official" / DATASET_FILE)
        eval_module = _module("eval_uvrb_recall_official", work / "official" / EVAL_FILE)
        directory = golden.make_tiny_embed_rl(work / "tiny")
        weights = golden.weights_summary(directory)
        add_processor_files(directory)
        checkpoint_video_bounds(directory)
        runs = run_official(eval_module, messages_per_side(dataset_module, work / "data"), directory)
    write_goldens(args.out, golden, {"repo": OFFICIAL_REPO, "paths": [DATASET_FILE, EVAL_FILE], "commit": commit,
                                     "sha256": digests,
                                     "shim": {"module": CONSTANTS_SHIM[0], "from": CONSTANTS_SHIM[1]}},
                  {"transformers": transformers.__version__, "torch": torch.__version__,
                   "qwen_vl_utils": _distribution_version("qwen-vl-utils"),
                   "torchvision": _distribution_version("torchvision")}, weights, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
