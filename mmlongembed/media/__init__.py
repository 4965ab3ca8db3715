"""Heavy media I/O (PDF rendering, video decoding, frame stores): builders call it, operations never
do. Imports ``core`` only."""
