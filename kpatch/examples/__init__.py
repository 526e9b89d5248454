"""The example upstreams kpatch builds itself, what they do next, and the demo that runs on them."""
