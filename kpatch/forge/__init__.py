"""Where upstreams are hosted: GitHub, through PyGithub, is the one forge kpatch speaks to."""
