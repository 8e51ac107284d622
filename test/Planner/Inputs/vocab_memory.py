"""Sets braid-plan's memory per rank against braidc --memory-report's for a
model with a large vocabulary (test/Planner/large-vocab.test).

Arguments: plan.json report.txt TOLERANCE. For each rank (pipeline stage),
the planner's total against the report's total plus the planner's
workspace (the runtime's, MPI's and the executable's fixed part, which the
report leaves out): that sum is the peak resident set issue 13 compares
with (measured for the test's GPT: pp=2 1F1B with vocabulary 32768, stage
0 91.6 MiB against 72.67 + 18.88). Within TOLERANCE (relative) on every
rank.
"""

import sys

from memory_report import compare

if __name__ == "__main__":
    sys.exit(compare(sys.argv, with_workspace=True))
