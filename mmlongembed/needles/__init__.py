"""Needles for the Visual Grounding task: confusable families of text needles (NeedleBench
format, core entity swapped) and of procedurally drawn image needles (one attribute varied).
Imports nothing else of the toolkit."""
