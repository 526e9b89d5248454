"""The fast tier: no git repository, Docker engine or torch (the whole folder in seconds)."""
