"""A registered builder for hand-made test pools, so that their builds validate (and can be
published) like real ones: the generic invariants and the shortcut audit, no builder rules."""

from mmlongembed.core.builder import Builder, register


@register
class FixtureBuilder(Builder):
    """Hand-made pools of the tests."""

    name = "fixture"
    version = "0.0.0"
    task = "logical_summarization"
    title = "Test fixture"
    card_template = "benchmark.md.j2"
