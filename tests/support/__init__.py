"""What the tiers share: example projects and repositories, fakes (GitHub, dists, wheels), the CLI runner."""
