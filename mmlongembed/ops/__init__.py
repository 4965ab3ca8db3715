"""Operations: pure functions over documents with an explicit random generator and no I/O: fit to
length, replace a span with a donor, BM25 and word statistics, needles in haystacks, page windows,
temporal runs and shuffles, MVEB cuts, EviAlign targets; Multi-Source Reasoning's in
``multisource``. Imports only ``core``."""
