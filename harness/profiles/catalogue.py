"""The catalogue of model profiles: one declarative entry per model of the paper (Table 2), plus
jina-embeddings-v4, ColQwen2.5 and the Doubao-Seed-1.6 API, each in its family's module
(harness/profiles/<family>.py, a ``MODELS`` tuple of ``ModelProfile`` entries with every field named);
the schema and its rules are harness/profiles/schema.py.

A profile is data (like mteb's ``ModelMeta``); ``harness.models.profile_model`` runs it. Every fact group
names its source (a repository, a path in it and the commit or release read), checked here when the
catalogue loads, as is that no two profiles share a name. ``verified`` says which reference the profile
was checked against side by side (tests/harness/profiles/test_profiles_side_by_side.py, gate: max abs
difference <= 1e-5 in fp32 on tiny random models of the real architecture) or why it was not; results of
an unverified profile carry that reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.profiles import colqwen, doubao, embed_rl, gme, jina, ops_mm, qwen3_vl, rzen, vlm2vec
from harness.profiles.schema import (CHAT, DEFAULT_SYSTEM, MTEB, MTEB_RELEASE, QWEN_VISION, WRAPPERS, ImageLimits,
                                     ModelProfile, ProfileError, SideForm, Source, TrainingData, Verification,
                                     VideoInput, source_faults, value_faults)
from mmlongembed.core.errors import UserError

# the schema's names stay importable from here, where they were defined before the families' modules
# (and from `harness.profiles`, which forwards its old names here)
__all__ = ["CHAT", "DEFAULT_SYSTEM", "FAMILIES", "MTEB", "MTEB_RELEASE", "PROFILES", "QWEN_VISION", "WRAPPERS",
           "ImageLimits", "ModelProfile", "ProfileError", "SideForm", "Source", "TrainingData", "Verification",
           "VideoInput", "checked_catalogue", "get_profile"]

# the family modules in the order `mmle models` lists their profiles
FAMILIES = (qwen3_vl, gme, rzen, ops_mm, embed_rl, vlm2vec, jina, colqwen, doubao)


def checked_catalogue(profiles: Iterable[ModelProfile]) -> dict[str, ModelProfile]:
    """The profiles by name, in their order; refused (ProfileError) if two share a name, one has a
    value the runner does not know, or one lacks a source for a fact it states."""
    catalogue: dict[str, ModelProfile] = {}
    for profile in profiles:
        if profile.name in catalogue:
            raise ProfileError(f"two model profiles are named {profile.name!r}: a name is the --model name, "
                               "one profile each")
        faults = value_faults(profile) + source_faults(profile)
        if faults:
            raise ProfileError(f"model profile {profile.name!r}: " + "; ".join(faults))
        catalogue[profile.name] = profile
    return catalogue


PROFILES: dict[str, ModelProfile] = checked_catalogue(profile for family in FAMILIES for profile in family.MODELS)


def get_profile(name: str) -> ModelProfile:
    profile = PROFILES.get(name.strip().lower())
    if profile is None:
        raise UserError(f"no model profile {name!r}; `mmle models` lists them: {', '.join(PROFILES)}")
    return profile
