"""Sets the program's part of braid-plan's memory per rank (its total less
the hardware file's workspace, what a rank holds beside the program)
against braidc --memory-report's total for the same plan
(test/Planner/pipeline-arenas.test).

Arguments: plan.json report.txt TOLERANCE. Within TOLERANCE (relative) on
every rank (pipeline stage).
"""

import sys

from memory_report import compare

if __name__ == "__main__":
    sys.exit(compare(sys.argv, with_workspace=False))
