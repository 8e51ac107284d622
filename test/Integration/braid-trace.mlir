// Tests braid-trace on a dp=2 program's --trace: a row per rank and step
// (the step's time, its communication wait and the rest) and a total per
// rank, whose figures add up; and its errors for a missing file, a file
// that is not JSON and a trace without steps.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --mesh dp=2 --lr 0.01 -o %t.prog
// RUN: braid-run -n 2 %t.prog --steps 3 --seed 1 --trace %t.json > /dev/null
// RUN: braid-trace %t.json | FileCheck %s
// CHECK: rank  step {{ *}}ms  comm_ms  other_ms  comm_%
// CHECK-NEXT: 0 {{ *}}0 {{.*}}
// CHECK-NEXT: 0 {{ *}}1 {{.*}}
// CHECK-NEXT: 0 {{ *}}2 {{.*}}
// CHECK-NEXT: 0 {{ *}}all {{.*}}
// CHECK-NEXT: 1 {{ *}}0 {{.*}}
// CHECK: 1 {{ *}}all {{.*}}
//
// RUN: braid-trace %t.json --csv > %t.csv
// RUN: %PYTHON -c "import csv, sys; rows = list(csv.DictReader(open(sys.argv[1]))); \
// RUN:   steps = [r for r in rows if r['step'] != 'all']; totals = [r for r in rows if r['step'] == 'all']; \
// RUN:   f = lambda r, k: float(r[k]); \
// RUN:   assert len(steps) == 6 and len(totals) == 2, rows; \
// RUN:   assert all(0 < f(r, 'comm_ms') <= f(r, 'ms') and abs(f(r, 'ms') - f(r, 'comm_ms') - f(r, 'other_ms')) < 2e-3 for r in steps), steps; \
// RUN:   assert all(abs(sum(f(s, 'ms') for s in steps if s['rank'] == t['rank']) - f(t, 'ms')) < 5e-3 for t in totals), totals; \
// RUN:   print('consistent')" %t.csv | FileCheck %s --check-prefix=SUMS
// SUMS: consistent
//
// RUN: not braid-trace %t.missing.json 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: braid-trace: error: {{.*}}missing.json: No such file or directory
// RUN: echo '{"traceEvents": [' > %t.bad.json
// RUN: not braid-trace %t.bad.json 2>&1 | FileCheck %s --check-prefix=BADJSON
// BADJSON: braid-trace: error: {{.*}}bad.json:2:1: not JSON
// RUN: echo '{"traceEvents": []}' > %t.empty.json
// RUN: not braid-trace %t.empty.json 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: braid-trace: error: {{.*}}empty.json: no step events
