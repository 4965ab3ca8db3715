"""qwen-vl-utils' image sizing (`smart_resize`, copied by GME's and RzenEmbed's code too), and an ordered
frame sequence as Qwen3-VL's video input, the way Qwen3-VL-Embedding's official embedder
feeds a list of frames (QwenLM/Qwen3-VL-Embedding, src/models/qwen3_vl_embedding.py: `format_model_input`
and `_preprocess_inputs`, which hand the frames to qwen-vl-utils' `fetch_video` and the pixels to the
Qwen3-VL processor with `do_resize=False`), built without torchvision (transformers 5's video processor
needs it; its resize is plain torch, repeated here op for op).

The steps, in the official order:
1. at most `max_frames` frames, evenly spaced (the embedder's `sample_frames`);
2. each frame snapped to whole 64-px cells within [4, 16384] cells (qwen-vl-utils' `fetch_image`,
   handed the 32-px cell as its patch size, so it doubles it), by PIL's bicubic resize;
3. an odd count padded with the last frame (temporal patches of two frames);
4. the clip resized to whole 32-px cells with each frame's pixels in [128, min(768, total / frames
   * 2)] cells (bicubic, antialiased, rounded back to 8 bits: torchvision's tensor resize);
5. rescaled, normalised and cut into patches as Qwen3VLVideoProcessor does;
6. in the prompt, per two-frame group: "<t seconds>" (the group's mean time at qwen-vl-utils' 2 fps
   for a frame list, one decimal) then <|vision_start|>, one <|video_pad|> per 32-px cell, <|vision_end|>.
"""

from __future__ import annotations

import io
import math

import numpy as np

from harness.profiles.schema import VideoInput

FRAME_CELL_FACTOR = 2  # fetch_image is handed the cell (32 px) as its patch size and doubles it
FRAME_CELLS = (4, 16384)  # fetch_image's default token bounds
VIDEO_CELLS = (128, 768)  # qwen-vl-utils' VIDEO_MIN_TOKEN_NUM, VIDEO_MAX_TOKEN_NUM
TEMPORAL_PATCH = 2  # frames per temporal patch (qwen-vl-utils' FRAME_FACTOR)


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """qwen_vl_utils' resize (copied by GME's and RzenEmbed's inference code): whole `factor` cells,
    the aspect ratio kept, the pixel count within [min_pixels, max_pixels]."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def sampled(frames: list, max_frames: int) -> list:
    """At most `max_frames` frames, evenly spaced (np.linspace, truncated to ints, as sample_frames)."""
    if len(frames) <= max_frames:
        return list(frames)
    return [frames[i] for i in np.linspace(0, len(frames) - 1, max_frames, dtype=int).tolist()]


def frame_size(height: int, width: int, cell: int, video: VideoInput) -> tuple[int, int]:
    """A frame's size after fetch_image (its pixel bounds: the caller's, else its default cell counts)."""
    factor = cell * FRAME_CELL_FACTOR
    bounds = video.frame_pixels or (FRAME_CELLS[0] * factor * factor, FRAME_CELLS[1] * factor * factor)
    return smart_resize(height, width, factor, *bounds)


def clip_size(height: int, width: int, n_frames: int, cell: int, video: VideoInput) -> tuple[int, int]:
    """The clip's size after fetch_video, for `n_frames` frames (already padded to even) of this size."""
    min_pixels = VIDEO_CELLS[0] * cell * cell
    max_pixels = max(min(VIDEO_CELLS[1] * cell * cell, video.total_pixels / n_frames * TEMPORAL_PATCH),
                     int(min_pixels * 1.05))
    return smart_resize(height, width, cell, min_pixels, max_pixels)


def padded_count(n_frames: int) -> int:
    return -(-n_frames // TEMPORAL_PATCH) * TEMPORAL_PATCH


def layout(frame_sizes: list[tuple[int, int]], cell: int, video: VideoInput) -> tuple[int, int, int, int]:
    """(padded frame count, clip height, clip width, visual tokens per two-frame group) from the frames'
    (height, width), without decoding their pixels."""
    from harness.models.adapters import ModelError

    n = padded_count(min(len(frame_sizes), video.max_frames))
    snapped = {frame_size(*size, cell, video) for size in sampled(frame_sizes, video.max_frames)}
    if len(snapped) > 1:  # the official code would stack them and fail (then embed the text "NULL")
        raise ModelError(f"a frame sequence's frames differ in size ({sorted(set(frame_sizes))}): one video's "
                         "frames share one size")
    height, width = snapped.pop()
    height, width = clip_size(height, width, n, cell, video)
    return n, height, width, (height // cell) * (width // cell)


def prompt(n_frames: int, tokens_per_group: int, fps: float) -> str:
    """The video's text: per two-frame group its mean time, then its visual tokens between the markers
    (Qwen3VLProcessor's replacement; the group times as its _calculate_timestamps)."""
    times = [i / fps for i in range(n_frames)]
    groups = [(times[i] + times[i + TEMPORAL_PATCH - 1]) / 2 for i in range(0, n_frames, TEMPORAL_PATCH)]
    block = "<|vision_start|>" + "<|video_pad|>" * tokens_per_group + "<|vision_end|>"
    return "".join(f"<{t:.1f} seconds>" + block for t in groups)


def _rgb(data: bytes):
    """qwen-vl-utils' to_rgb: an RGBA image on white, anything else converted to RGB."""
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    if image.mode == "RGBA":
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image, mask=image.split()[3])
        return background
    return image.convert("RGB")


def clip_pixels(frames: list[bytes], cell: int, video: VideoInput):
    """The clip as fetch_video returns it: a float tensor (frames, 3, height, width) of 0..255 values."""
    import torch
    import torch.nn.functional as F

    pictures = []
    for data in sampled(frames, video.max_frames):
        picture = _rgb(data)
        height, width = frame_size(picture.height, picture.width, cell, video)
        pictures.append(picture.resize((width, height)))
    pictures += [pictures[-1]] * (padded_count(len(pictures)) - len(pictures))
    clip = torch.stack([torch.from_numpy(np.array(p).transpose(2, 0, 1)) for p in pictures])
    height, width = clip_size(clip.shape[2], clip.shape[3], len(pictures), cell, video)
    if (height, width) != tuple(clip.shape[2:]):  # torchvision returns the input itself when sizes match
        resized = F.interpolate(clip.float(), size=[height, width], mode="bicubic", align_corners=False,
                                antialias=True)
        clip = torch.round(resized.clamp(min=0, max=255)).to(torch.uint8)
    return clip.float()


def processor_settings(source: str, **kwargs) -> dict:
    """The video processor's own settings (mean, std, rescale factor, patch and merge sizes): the
    model's video_preprocessor_config.json where it has one, else Qwen3VLVideoProcessor's defaults.
    They are not the image processor's (Qwen3-VL normalises video with 0.5 means and deviations)."""
    import json

    from transformers.utils import cached_file

    # the module itself, not the top-level name (a placeholder that raises without torchvision)
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    keys = ("image_mean", "image_std", "rescale_factor", "patch_size", "merge_size", "temporal_patch_size")
    settings = {key: getattr(Qwen3VLVideoProcessor, key) for key in keys}
    file = cached_file(source, "video_preprocessor_config.json", _raise_exceptions_for_missing_entries=False, **kwargs)
    if file:
        with open(file) as handle:
            stated = json.load(handle)
        settings.update({key: stated[key] for key in keys if key in stated})
    return settings


def video_patches(clip, settings: dict):
    """(pixel_values_videos, grid_thw) of one clip, as Qwen3VLVideoProcessor computes them with
    do_resize=False: fused rescale-and-normalise in fp32, then its patchify."""
    import torch
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    scale = 1.0 / settings["rescale_factor"]
    mean = (torch.tensor(settings["image_mean"]) * scale).view(-1, 1, 1)
    std = (torch.tensor(settings["image_std"]) * scale).view(-1, 1, 1)
    normalised = (clip.to(torch.float32) - mean) / std
    # patchify uses nothing of the instance (the class itself cannot be built without torchvision)
    patches, grid_t, grid_h, grid_w = Qwen3VLVideoProcessor.patchify(
        None, normalised.unsqueeze(0), patch_size=settings["patch_size"], merge_size=settings["merge_size"],
        temporal_patch_size=settings["temporal_patch_size"])
    return patches[0], (grid_t, grid_h, grid_w)
