"""The loader of model profiles (`mmle score --model gme-qwen2-vl-2b`): which adapter runs a
profile. Single-vector profiles run in ``harness.models.profile_model``, multi-vector ones (ColQwen2.5) in
``harness.models.profile_multivector`` (built on it), the API's in ``harness.models.doubao_model``; this module
sits above all three, so none of them imports another's loader.
"""

from __future__ import annotations

from harness.models.adapters import PROFILE_LOADER, Model, RunSettings
from harness.models.profile_model import ProfileModel
from harness.models.profile_multivector import MultiVectorProfileModel
from harness.profiles.catalogue import get_profile


@PROFILE_LOADER.register("profile")
def load_profile_model(name: str, settings: RunSettings) -> Model:
    profile = get_profile(name)
    path = (settings.model_paths or {}).get(profile.name)
    if profile.family == "api":  # the Doubao API's profile runs its adapter at mteb's endpoint
        from harness.models.doubao_model import ARK_BASE_URL, DoubaoModel  # the openai client, only when asked for

        return DoubaoModel(profile.repo, ARK_BASE_URL, settings)
    if profile.query is not None and profile.query.pooling == "multi_vector":
        return MultiVectorProfileModel(profile, settings, path)
    return ProfileModel(profile, settings, path)
