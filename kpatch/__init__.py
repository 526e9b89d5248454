"""kpatch: keep accelerator-stack fixes as ordered patch stacks on their upstreams."""

__version__ = "0.1.0"
