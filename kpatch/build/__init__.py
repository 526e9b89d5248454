"""Building the matched wheel pair: the container engine seam and the wheel build steps."""
