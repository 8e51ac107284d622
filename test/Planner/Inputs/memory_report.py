"""Reads braidc --memory-report's text: the total bytes per rank (one row
`all ...` without a pipeline, one row `stage S ...` per pipeline stage)."""


def reported_totals(path):
    """Each rank's total bytes, in rank (stage) order."""
    rows = []
    with open(path) as f:
        for line in f:
            words = line.split()
            if words and words[0] == "all":
                rows.append(float(words[6]))
            elif len(words) > 2 and words[0] == "stage":
                rows.append(float(words[7]))
    return rows
