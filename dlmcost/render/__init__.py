"""Output: terminal tables, JSON/CSV/JSONL/Markdown, charts and the HTML report. It reads
results only (dlmcost.results and the plan's result types), never a database or a registry,
and is reached from the CLI alone.

    output.py         the output stream, and rich's Console over it for what is drawn (width, colour)
    tables.py         terminal tables: rich's Table, fitted to the width by dropping columns
    labels.py         words tables and charts share (the knee, the knobs a scheme reads)
    cells.py          how a table cell writes a number or a word
    formats.py        the --format names, and JSON, CSV and Markdown from rows
    analyze.py, sweep.py, plan.py, serve.py, catalog.py
                      each command's rows, tables, machine formats and HTML page
    report_stacks.py  measure's and calibrate's tables
    charts.py         chart data from results; plot.py draws it with matplotlib; termplot.py on a terminal
    page.py           the parts of an HTML page; html.py the pages by the name the CLI imports
    progress.py       rich's progress bar on a terminal's stderr, for work over a second
"""
