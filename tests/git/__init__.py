"""Real git repositories and local builds (the package index for their seed venv); no Docker engine."""
