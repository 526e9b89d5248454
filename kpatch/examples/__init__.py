"""The example upstreams kpatch builds itself (upstreams, ext), what they do next (moves) and a release line on
them (lines): real git repositories the demo and the tests run on. The demo's pipeline is kpatch/demo/."""
