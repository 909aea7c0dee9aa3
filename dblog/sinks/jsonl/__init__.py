"""The JSON-lines sink: one JSON object per change, appended to a file."""
