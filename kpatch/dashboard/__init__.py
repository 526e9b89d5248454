"""The carry dashboard: what each patch costs to keep, over time (issue 29).

    record.record_night(ui, stack, report, record.location(stack, report_dir))  # the nightly, once a night
    board = report.dashboard(history_file)                                      # the numbers (--json)
    page.write(folder, board, title)                                            # index.html, self-contained

Modules: `history` (the JSON-lines file: records, version, compaction), `record` (a night's report as records),
`summary` (the numbers the page and --json share), `svg` (sparklines and the line chart), `page` (the HTML),
`report` (what `kpatch report` does).
"""
