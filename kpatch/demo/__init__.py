"""`kpatch demo`: the whole pipeline on the example upstreams (pipeline), and its modes: --adopt (adoption),
--scroll (scrolling), and three simulated nights for a dashboard (nights)."""
