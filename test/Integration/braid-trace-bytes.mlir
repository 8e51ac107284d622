// Tests that the bytes a compiled program's trace counts (each
// collective's 'wire_bytes': for MPI's collectives the runtime's ring model
// of the issued collective, braid_rt_ring_sent, not traffic measured on the
// wire, so this checks the issued collectives' number and sizes; for the
// 16-bit sums and PowerSGD the messages they posted), summed per step by
// braid-trace, equal braid-comm-report's prediction for the same step, on a
// tiny GPT (2 layers, hidden 32) as dp=2 and dp=4: uncompressed, with bf16
// gradient sums and with PowerSGD at rank 2. Averaged over the ranks the
// ring's bytes are exactly the report's 2(n-1)/n S (per rank they differ by
// a chunk where n does not divide a buffer: the loss's one element on 4
// ranks), so the tolerance is the report's rounding to whole bytes (0.5);
// bf16 halves the compressed reductions' bytes exactly, and PowerSGD sends
// its factors' (rows + cols) R values per matrix, the report's figure.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-bucket-collectives --braid-comm-report -o /dev/null > %t.none.report
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 -o %t.none
// RUN: braid-run -n 2 %t.none --steps 2 --seed 1 --trace %t.none.json > /dev/null
// RUN: braid-trace %t.none.json --by-kind --csv > %t.none.csv
// RUN: %PYTHON %S/Inputs/trace-bytes.py %t.none.report %t.none.csv --ranks 2 | FileCheck %s --check-prefix=NONE
// NONE: ok: 2 steps sent 111108 bytes per rank (traced = predicted)
//
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-compress-gradients --braid-bucket-collectives --braid-comm-report -o /dev/null > %t.bf16.report
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression bf16 -o %t.bf16
// RUN: braid-run -n 2 %t.bf16 --steps 2 --seed 1 --trace %t.bf16.json > /dev/null
// RUN: braid-trace %t.bf16.json --by-kind --csv > %t.bf16.csv
// RUN: %PYTHON %S/Inputs/trace-bytes.py %t.bf16.report %t.bf16.csv --ranks 2 --uncompressed %t.none.csv --factor 2 | FileCheck %s --check-prefix=BF16
// BF16: ok: 2 steps sent 55556 bytes per rank (traced = predicted)
// BF16: ok: compressed sums sent 55552 bytes per rank, predicted 55552 instead of 111104
// BF16: ok: uncompressed they sent 111104 bytes per rank: 2.0000x fewer compressed
//
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-compress-gradients="format=powersgd rank=2" --braid-bucket-collectives --braid-comm-report -o /dev/null > %t.psgd.report
// RUN: braidc %t.mlir --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 -o %t.psgd
// RUN: braid-run -n 2 %t.psgd --steps 2 --seed 1 --trace %t.psgd.json > /dev/null
// RUN: braid-trace %t.psgd.json --by-kind --csv > %t.psgd.csv
// RUN: %PYTHON %S/Inputs/trace-bytes.py %t.psgd.report %t.psgd.csv --ranks 2 --uncompressed %t.none.csv | FileCheck %s --check-prefix=PSGD
// PSGD: ok: 2 steps sent {{[0-9]+}} bytes per rank (traced = predicted)
// PSGD: ok: compressed sums sent 10304 bytes per rank, predicted 10304 instead of 107520
// PSGD: ok: uncompressed they sent 107520 bytes per rank: 10.4348x fewer compressed
//
// dp=4 (4 ranks on this machine's cores): the ring's chunks differ per rank
// when 4 does not divide a buffer; their mean is still the report's.
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=4" --braid-propagate-sharding --braid-partition --braid-bucket-collectives --braid-comm-report -o /dev/null > %t.none4.report
// RUN: braidc %t.mlir --mesh dp=4 --lr 3e-3 -o %t.none4
// RUN: braid-run -n 4 %t.none4 --steps 2 --seed 1 --trace %t.none4.json > /dev/null
// RUN: braid-trace %t.none4.json --by-kind --csv > %t.none4.csv
// RUN: %PYTHON %S/Inputs/trace-bytes.py %t.none4.report %t.none4.csv --ranks 4 | FileCheck %s --check-prefix=NONE4
// NONE4: ok: 2 steps sent {{[0-9]+}} bytes per rank (traced = predicted)
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=4" --braid-propagate-sharding --braid-partition --braid-compress-gradients --braid-bucket-collectives --braid-comm-report -o /dev/null > %t.bf164.report
// RUN: braidc %t.mlir --mesh dp=4 --lr 3e-3 --grad-compression bf16 -o %t.bf164
// RUN: braid-run -n 4 %t.bf164 --steps 2 --seed 1 --trace %t.bf164.json > /dev/null
// RUN: braid-trace %t.bf164.json --by-kind --csv > %t.bf164.csv
// RUN: %PYTHON %S/Inputs/trace-bytes.py %t.bf164.report %t.bf164.csv --ranks 4 --uncompressed %t.none4.csv --factor 2 | FileCheck %s --check-prefix=BF164
// BF164: ok: uncompressed they sent {{[0-9]+}} bytes per rank: 2.0000x fewer compressed
//
// A wrong prediction fails: the dp=2 measurement against dp=4's report.
// RUN: not %PYTHON %S/Inputs/trace-bytes.py %t.none4.report %t.none.csv --ranks 2 2>&1 | FileCheck %s --check-prefix=WRONG
// WRONG: trace-bytes: FAILED: step 0: sent 111108.0 bytes per rank on average, the comm report predicts
