"""`mmle models`: every model profile with Table 2's columns, whether it is verified, and the
source of each of its facts (harness.profiles.catalogue)."""

from __future__ import annotations

import argparse
import json

from harness.profiles.catalogue import PROFILES, get_profile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", help="profiles to show (default all); `mmle score --model NAME` takes these")
    parser.add_argument("--json", action="store_true", help="print the profiles as JSON (every field) instead of tables")


def table(profiles) -> str:
    lines = ["| model | paper's name | context length | size | embedding dim | group | family | verified |",
             "|---|---|---:|---|---:|---|---|---|"]
    for p in profiles:
        verified = (f"yes: {p.verified.reference}, max abs diff {p.verified.max_abs_diff:.1e}" if p.verified
                    else f"no: {p.unverified_reason}")
        dim = f"{p.dim} (Table 2: {p.paper_dim} \u2260)" if p.paper_dim else str(p.dim)
        lines.append(f"| {p.name} | {p.paper_name or '-'} | {p.window} | {p.size or '-'} | {dim} | {p.group} | "
                     f"{p.family} | {verified} |")
    if any(p.paper_dim for p in profiles):
        lines += ["", "\u2260: the model's own embedding dim (what its checkpoint gives) differs from the paper's "
                  "Table 2; each profile's notes say which source gives which."]
    return "\n".join(lines)


def _instruction_phrase(place: str) -> str:
    """Where a side's instruction goes, as a phrase: "none" (or "none (why)") is a side without one."""
    if place == "none" or place.startswith("none ("):
        return "no instruction" + place[len("none"):]
    return f"instruction in the {place}"


def facts(profile) -> str:
    """One profile's facts, each with where it is stated."""
    lines = [f"## {profile.name}: {profile.repo}@{profile.revision}"]
    for side, form in (("query", profile.query), ("document", profile.document)):
        if form is not None:
            lines.append(f"- {side}: {_instruction_phrase(form.instruction_place)}; pooling {form.pooling}; "
                         f"normalised {form.normalise}; prompt {json.dumps(form.template)}"
                         + (f"; content followed by {json.dumps(form.content_suffix)}" if form.content_suffix else "")
                         + (f"; {json.dumps(form.after_leading_images)} after the leading images"
                            if form.after_leading_images else "")
                         + (f"; pooled at the token before {json.dumps(form.after_pooled)}" if form.after_pooled
                            else ""))
    if profile.images is not None:
        limits = profile.images
        lines.append(f"- images: {limits.factor} px per visual token (patch {limits.patch_size} x merge "
                     f"{limits.merge_size}), {limits.min_pixels}-{limits.max_pixels} pixels"
                     + (f", first snapped to {limits.factor} px within {limits.pre_resize}" if limits.pre_resize else ""))
    lines.append(f"- frames: fed as {profile.frames}; positions: {profile.positions}; dtype {profile.dtype}")
    lines.append(f"- `mmle score --model {profile.name}`: " + ("runs" if profile.runnable else
                                                                "refused (facts only, see why above)"))
    lines += [f"- source of {what}: {where}" for what, where in profile.sources.items()]
    lines += [f"- trained on {t.dataset} ({t.stated_in})" for t in profile.training_data]
    lines += [f"- note: {note}" for note in profile.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from mmlongembed.core.errors import UserError, report_error

    try:
        profiles = [get_profile(n) for n in args.names] if args.names else list(PROFILES.values())
    except UserError as exc:
        return report_error(exc)
    if args.json:
        print(json.dumps([p.as_dict() for p in profiles], indent=1))
        return 0
    print(table(profiles))
    for profile in profiles:
        print()
        print(facts(profile))
    return 0
