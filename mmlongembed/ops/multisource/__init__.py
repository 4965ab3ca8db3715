"""Operations of Multi-Source Reasoning (HotpotQA, MMDocRAG): documents grown from whole units
with the evidence kept, evidence removed and refilled at equal token length, interleaved text and
image quotes, answer anchors, and the guard that keeps a query's evidence out of other candidates.
Pure, like every operation: an explicit generator, no I/O; imports ``core`` and ``ops``.
"""
