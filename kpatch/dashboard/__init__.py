"""The carry dashboard: what each patch costs to keep, over time (issue 29).

    record.record_night(ui, stack, report, record.location(stack, report_dir))  # the nightly, once a night
    board = report.dashboard(history_file)                                      # the numbers (--json)
    page.write(folder, [(line, board), ...], title)                             # index.html, self-contained

Modules: `night` (the night's report as data: what the nightly writes, report.json), `cells` (upstream text as
markdown cells), `history` (the JSON-lines file: records, version, compaction), `record` (a night's report as records),
`summary` (the numbers the page and --json share), `svg` (sparklines and the line chart), `page` (the HTML),
`markdown` (the same as the "carry dashboard" issue's body, [dashboard] issue = true), `report` (what
`kpatch report` does).

kpatch.toml: `[dashboard] history = "path"` (default: history.jsonl in the nightly's report folder, the folder a
CI job keeps as its artifact) and `issue = true` (the nightly edits one GitHub issue in place; a person pins it).
"""
