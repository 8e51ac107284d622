"""Summarises a Chrome trace written by a braidc program's --trace: for
each event category, how many ranks (pids) have begin/complete events of it
and how many in all; with --rank R --first N, the names of rank R's first N
begin events (in time order)."""
import argparse
import collections
import json

parser = argparse.ArgumentParser()
parser.add_argument("trace")
parser.add_argument("--rank", type=int)
parser.add_argument("--first", type=int, default=0)
args = parser.parse_args()
data = json.load(open(args.trace))
events = data["traceEvents"] if isinstance(data, dict) else data
opened = [e for e in events if e.get("ph") in ("B", "X")]
ranks = collections.defaultdict(set)
counts = collections.Counter()
for e in opened:
    ranks[e.get("cat")].add(e["pid"])
    counts[e.get("cat")] += 1
for cat in sorted(c for c in ranks if c):
    print(f"{cat}: {counts[cat]} events on {len(ranks[cat])} ranks")
if args.rank is not None:
    mine = sorted((e for e in opened if e["pid"] == args.rank and e["ph"] == "B"),
                  key=lambda e: e["ts"])
    print(f"rank {args.rank}:", ", ".join(e["name"] for e in mine[: args.first]))
