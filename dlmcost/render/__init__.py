"""Output: terminal tables, JSON/CSV/JSONL/Markdown, charts and the HTML report. It reads
results only (dlmcost.results and the plan's result types), never a database or a registry,
and is reached from the CLI alone.

    output.py         the output stream: terminal width, colour, safe text
    textable.py       terminal tables
    report.py         analyze's and sweep's tables and machine formats
    report_stacks.py  measure's and calibrate's tables
    charts.py         chart data from results; plot.py draws it with matplotlib; termplot.py on a terminal
    html.py           the HTML report
"""
