"""`kpatch nightly`: rebase every stack onto its upstream branch head, build the pair, verify it, test it, write
the report (markdown and JSON) and tell GitHub (one pull request, or one `nightly-failure` issue).

    tgt = nightly.run.target(ws, os.environ, dry_run)          # the token registered for redaction first
    night = nightly.run.night(ws, ui, options, tgt, os.environ, show)   # -> Night(report, markdown, json)

The report as data is `dashboard.night` (the carry dashboard keeps it as history). Modules: `noop` (is tonight a
no-op?), `stages` (the four stages on the engine), `scroll` (red heads: the search for the last green upstream
commits, the culprit, flaky tests), `render` (markdown and JSON, one content), `publish` (the branch, the pull
request and the issue), `run` (the night in order).
"""
