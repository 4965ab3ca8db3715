"""mmlongembed: build long-context multimodal embedding benchmarks and score models on them."""

__version__ = "0.1.0"
