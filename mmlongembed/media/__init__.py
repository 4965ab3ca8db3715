"""Heavy media I/O (video decoding, frame stores): the only place builders touch codecs."""
