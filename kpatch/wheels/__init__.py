"""Building the matched wheel set: backends behind one Protocol (a Docker container, this host), cache keys,
versions, pins, wheel metadata, and publishing the set with its lock."""
