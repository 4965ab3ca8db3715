"""Heavy media I/O (PDF rendering, image files): builders call it, operations never do."""
