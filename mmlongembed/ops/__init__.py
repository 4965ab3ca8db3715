"""Operations: pure functions over documents with an explicit random generator and no I/O."""
