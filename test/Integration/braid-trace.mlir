// Tests braid-trace: on a hand-made trace, the exact figures per rank and
// step (waits and flights each counted once where they overlap, a started
// all_reduce in flight while the rank computes, a blocking one waited
// through, a step without communication) and their totals, and the bytes
// moved (the flights' 'bytes' and 'wire_bytes'; the exchanges within a
// 16-bit sum not counted again; per operation and mesh axes with --by-kind,
// quoted in CSV); on a dp=2 program's --trace, blocking and with
// --async-collectives, a row per rank and step whose figures add up, with
// no overlap when every collective blocks and some in every step when they
// are started early; and its errors for a missing file, a file that is not
// JSON, a trace without steps, a flight without its end and byte counts
// that are not integers. (Bytes against the comm report:
// braid-trace-bytes.mlir.)
//
// Rank 0, step 0 (10 ms): flights [1, 7] and [2, 4] ms (union 6 ms) and
// [8, 9] ms blocking; waits [5, 7], [4.5, 4.5] and [8, 9] ms: 3 ms waited,
// 7 ms in flight, of which [1, 5] ms (4 ms, 57.1%) not waited for. Bytes:
// an all_reduce over dp (16384, 16384 sent), one over dp,tp (400, 600), the
// blocking one without byte counts. Rank 1: an all_reduce (16384, 16384)
// and a 16-bit one (16384, 8192 sent) whose two exchanges (within it) are
// not counted again.
// RUN: braid-trace %S/Inputs/overlap-trace.json | FileCheck %s --check-prefix=EXACT
// EXACT:      rank  step      ms  compute_ms  wait_ms  in_flight_ms  wait_%  overlap_%  bytes  wire_bytes
// EXACT-NEXT:    0     0  10.000       7.000    3.000         7.000    30.0       57.1  16784       16984
// EXACT-NEXT:    0     1  10.000      10.000    0.000         0.000     0.0          -      0           0
// EXACT-NEXT:    0   all  20.000      17.000    3.000         7.000    15.0       57.1  16784       16984
// EXACT-NEXT:    1     0  10.000       8.000    2.000         2.000    20.0        0.0  32768       24576
// EXACT-NEXT:    1   all  10.000       8.000    2.000         2.000    20.0        0.0  32768       24576
// RUN: braid-trace %S/Inputs/overlap-trace.json --csv | FileCheck %s --check-prefix=EXACT-CSV
// EXACT-CSV:      rank,step,ms,compute_ms,wait_ms,in_flight_ms,wait_%,overlap_%,bytes,wire_bytes
// EXACT-CSV-NEXT: 0,0,10.000,7.000,3.000,7.000,30.0,57.1,16784,16984
// EXACT-CSV-NEXT: 0,1,10.000,10.000,0.000,0.000,0.0,,0,0{{$}}
// RUN: braid-trace %S/Inputs/overlap-trace.json --by-kind | FileCheck %s --check-prefix=KIND
// KIND:      rank  step                   op   axes  ops  bytes  wire_bytes
// KIND-NEXT:    0     0           all_reduce     dp    1  16384       16384
// KIND-NEXT:    0     0           all_reduce  dp,tp    1    400         600
// KIND-NEXT:    0   all           all_reduce     dp    1  16384       16384
// KIND-NEXT:    0   all           all_reduce  dp,tp    1    400         600
// KIND-NEXT:    1     0           all_reduce     dp    1  16384       16384
// KIND-NEXT:    1     0  all_reduce (16-bit)     dp    1  16384        8192
// KIND-NEXT:    1   all           all_reduce     dp    1  16384       16384
// KIND-NEXT:    1   all  all_reduce (16-bit)     dp    1  16384        8192
// RUN: braid-trace %S/Inputs/overlap-trace.json --by-kind --csv | FileCheck %s --check-prefix=KIND-CSV
// KIND-CSV:      rank,step,op,axes,ops,bytes,wire_bytes
// KIND-CSV-NEXT: 0,0,all_reduce,dp,1,16384,16384
// KIND-CSV-NEXT: 0,0,all_reduce,"dp,tp",1,400,600
// A trace without byte counts (the CUDA backend's): '-', empty in CSV.
// RUN: sed -e 's/,"bytes":[0-9]*,"wire_bytes":[0-9]*//' %S/Inputs/overlap-trace.json > %t.nobytes.json
// RUN: braid-trace %t.nobytes.json | FileCheck %s --check-prefix=NOBYTES
// NOBYTES: 0     0  10.000       7.000    3.000         7.000    30.0       57.1  -  -{{$}}
// RUN: braid-trace %t.nobytes.json --csv | FileCheck %s --check-prefix=NOBYTES-CSV
// NOBYTES-CSV: 0,0,10.000,7.000,3.000,7.000,30.0,57.1,,{{$}}
// A rank without byte counts beside one with them: '-' for it, not 0.
// RUN: sed -e '/"pid":1/s/,"bytes":[0-9]*,"wire_bytes":[0-9]*//' %S/Inputs/overlap-trace.json > %t.mixed.json
// RUN: braid-trace %t.mixed.json | FileCheck %s --check-prefix=MIXED
// MIXED:      0     0  10.000       7.000    3.000         7.000    30.0       57.1  16784       16984
// MIXED:      1     0  10.000       8.000    2.000         2.000    20.0        0.0      -           -{{$}}
// MIXED-NEXT: 1   all  10.000       8.000    2.000         2.000    20.0        0.0      -           -{{$}}
// RUN: braid-trace %t.mixed.json --csv | FileCheck %s --check-prefix=MIXED-CSV
// MIXED-CSV: 1,0,10.000,8.000,2.000,2.000,20.0,0.0,,{{$}}
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --mesh dp=2 --lr 0.01 -o %t.prog
// RUN: braid-run -n 2 %t.prog --steps 3 --seed 1 --trace %t.json > /dev/null
// RUN: braid-trace %t.json | FileCheck %s
// CHECK: rank  step {{ *}}ms  compute_ms  wait_ms  in_flight_ms  wait_%  overlap_%
// CHECK-NEXT: 0 {{ *}}0 {{.*}}
// CHECK-NEXT: 0 {{ *}}1 {{.*}}
// CHECK-NEXT: 0 {{ *}}2 {{.*}}
// CHECK-NEXT: 0 {{ *}}all {{.*}}
// CHECK-NEXT: 1 {{ *}}0 {{.*}}
// CHECK: 1 {{ *}}all {{.*}}
//
// Blocking collectives: every step waits on communication through all of
// its flight (overlap 0).
// RUN: braid-trace %t.json --csv > %t.csv
// RUN: %PYTHON %S/Inputs/trace-rows.py %t.csv blocking | FileCheck %s --check-prefix=SUMS
// SUMS: consistent
//
// Started collectives (braid-schedule-collectives starts the head's
// gradient all_reduces before the layers' backward): in flight during
// compute in every step.
// RUN: braidc %t.mlir --mesh dp=2 --lr 0.01 --async-collectives -o %t.async
// RUN: braid-run -n 2 %t.async --steps 3 --seed 1 --trace %t.async.json > /dev/null
// RUN: braid-trace %t.async.json --csv > %t.async.csv
// RUN: %PYTHON %S/Inputs/trace-rows.py %t.async.csv started | FileCheck %s --check-prefix=SUMS
//
// RUN: not braid-trace %t.missing.json 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: braid-trace: error: {{.*}}missing.json: No such file or directory
// RUN: echo '{"traceEvents": [' > %t.bad.json
// RUN: not braid-trace %t.bad.json 2>&1 | FileCheck %s --check-prefix=BADJSON
// BADJSON: braid-trace: error: {{.*}}bad.json:2:1: not JSON
// An event of the wrong shape is named by its index (a list of numbers, a
// string ts or dur, a list pid, a begin without a name and a binary file
// ended in Python tracebacks).
// RUN: echo '{"traceEvents": [5]}' > %t.num.json
// RUN: not braid-trace %t.num.json 2>&1 | FileCheck %s --check-prefix=NOTOBJ
// NOTOBJ: braid-trace: error: {{.*}}num.json: traceEvents[0]: expected an object, got 5
// RUN: sed -e 's/"ts":7000.000/"ts":"7000"/' %S/Inputs/overlap-trace.json > %t.ts.json
// RUN: not braid-trace %t.ts.json 2>&1 | FileCheck %s --check-prefix=TS
// TS: braid-trace: error: {{.*}}ts.json: traceEvents[{{[0-9]+}}] ({{.*}}): 'ts' must be a number, got "7000"
// RUN: echo '{"traceEvents": [{"cat":"step","ph":"B","ts":1,"pid":[0]}]}' > %t.pid.json
// RUN: not braid-trace %t.pid.json 2>&1 | FileCheck %s --check-prefix=PID
// PID: braid-trace: error: {{.*}}pid.json: traceEvents[0] (ph B): 'pid' must be a number, got [0]
// RUN: echo '{"traceEvents": [{"cat":"step","ph":"B","ts":1}]}' > %t.noname.json
// RUN: not braid-trace %t.noname.json 2>&1 | FileCheck %s --check-prefix=NONAME
// NONAME: braid-trace: error: {{.*}}noname.json: traceEvents[0] (ph B): 'name' must be a string
// RUN: %PYTHON -c "open('%t.binary.json', 'wb').write(bytes([0x7b, 0xff, 0xfe]))"
// RUN: not braid-trace %t.binary.json 2>&1 | FileCheck %s --check-prefix=BINARY
// BINARY: braid-trace: error: {{.*}}binary.json: not JSON: byte 1 is not UTF-8
// RUN: echo '{"traceEvents": []}' > %t.empty.json
// RUN: not braid-trace %t.empty.json 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: braid-trace: error: {{.*}}empty.json: no step events
// RUN: grep -v '"ph":"e","ts":7000' %S/Inputs/overlap-trace.json > %t.open.json
// RUN: not braid-trace %t.open.json 2>&1 | FileCheck %s --check-prefix=OPEN
// OPEN: braid-trace: error: {{.*}}open.json: rank 0: flight 'all_reduce' (id 0x0) begins without an end
// RUN: sed -e 's/"wire_bytes":600/"wire_bytes":"600"/' %S/Inputs/overlap-trace.json > %t.str.json
// RUN: not braid-trace %t.str.json 2>&1 | FileCheck %s --check-prefix=NOTINT
// NOTINT: braid-trace: error: {{.*}}str.json: rank 0: flight 'all_reduce' at 2000.0 us: 'bytes' and 'wire_bytes' must be integers >= 0
