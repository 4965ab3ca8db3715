"""Source readers: one module per source, each turning a source's files (in their original
format) or its Hub rows into the records its builder works on. Reading is all they do: no
random choice, no pool logic."""
