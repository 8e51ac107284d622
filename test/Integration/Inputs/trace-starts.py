"""Prints, per step of one rank of a braidc program's --trace, the order in
which the rank started its collectives and waited for its all_reduces: the
names of the 'X start' events and of the all_reduce waits (the 'all_reduce'
events) in time order, runs of one name counted ('all_gather start x36').
With --actions, a pipeline's actions (its F, B and W pieces) are listed
too, each as 'actions' (a run of them counted). The order is the program's;
the times are not printed."""
import argparse
import itertools
import json

parser = argparse.ArgumentParser()
parser.add_argument("trace")
parser.add_argument("--rank", type=int, default=0)
parser.add_argument("--actions", action="store_true")
args = parser.parse_args()
data = json.load(open(args.trace))
events = data["traceEvents"] if isinstance(data, dict) else data
mine = sorted((e for e in events
               if e.get("pid") == args.rank and e.get("ph") in ("B", "E", "X")),
              key=lambda e: e["ts"])
steps = []
# Open begin events inside the step (a pipeline's actions), and whether
# we are between a step's begin and its end (not a checkpoint's save).
depth = 0
inside = False
for e in mine:
    if e["ph"] == "B" and e.get("cat") == "step":
        steps.append([])
        inside = True
        depth = 0
    elif e["ph"] == "B":
        depth += 1
        if inside and args.actions and e.get("cat") == "pipeline":
            steps[-1].append("actions")
    elif e["ph"] == "E":
        if depth:
            depth -= 1
        else:
            inside = False
    elif inside and e["name"].endswith(" start"):
        steps[-1].append(e["name"])
    elif inside and e["name"] == "all_reduce":
        steps[-1].append("all_reduce wait")
for i, names in enumerate(steps):
    runs = [f"{name} x{len(list(run))}" for name, run in itertools.groupby(names)]
    print(f"step {i}: " + ", ".join(runs))
