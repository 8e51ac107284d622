// Tests that every kind of bad input to braid-eval gives a clear, located
// error and a non-zero exit, never a crash.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/good.st table:F32:8x4:0.5 h.0.fc.weight:F32:4x4:0.25
//
// Tests that a good weights file is accepted, and that a run is
// reproducible from the saved weights and inputs.
// RUN: braid-eval %S/Inputs/tiny.mlir --weights %t/good.st | FileCheck %s --check-prefix=GOOD
// GOOD: result 0: tensor<f32> = 1.3862943{{[0-9]*$}}
// RUN: braid-eval %S/Inputs/tiny.mlir --seed 7 --save-weights %t/w7.st --save-inputs %t/i7.st | grep '^result' > %t/a.txt
// RUN: braid-eval %S/Inputs/tiny.mlir --seed 8 --weights %t/w7.st --inputs %t/i7.st | grep '^result' > %t/b.txt
// RUN: diff %t/a.txt %t/b.txt
// RUN: braid-eval %S/Inputs/tiny.mlir --seed 8 | grep '^result' > %t/c.txt
// RUN: not diff %t/a.txt %t/c.txt
//
// RUN: not braid-eval %t/missing.mlir 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: cannot open input file '{{.*}}missing.mlir'
//
// RUN: printf 'func.func @f( {' > %t/bad.mlir
// RUN: not braid-eval %t/bad.mlir 2>&1 | FileCheck %s --check-prefix=MALFORMED
// MALFORMED: bad.mlir:1:{{[0-9]+}}: error:
//
// RUN: not braid-eval %S/Inputs/tiny.mlir --entry nope 2>&1 | FileCheck %s --check-prefix=ENTRY
// ENTRY: error: no function @nope in {{.*}}tiny.mlir; it defines @forward, @unranged
//
// RUN: not braid-eval %S/Inputs/tiny.mlir --entry unranged 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: error: integer argument 'arg0' needs a positive 'braid.range' argument attribute to be generated, or a value in the inputs file
//
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/none.st 2>&1 | FileCheck %s --check-prefix=NOWEIGHTS
// NOWEIGHTS: error: {{.*}}none.st: cannot read: No such file or directory
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/missing.st table:F32:8x4:0.5
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/missing.st 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: tiny.mlir:3:8: error: 'braid.param' op parameter 'h.0.fc.weight' ('tensor<4x4xf32>') is missing from the weights file
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/shape.st table:F32:8x4:0.5 h.0.fc.weight:F32:4x3:0.25
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/shape.st 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: 'braid.param' op parameter 'h.0.fc.weight' has shape [4, 3] in the weights file; the model declares [4, 4]
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/extra.st table:F32:8x4:0.5 h.0.fc.weight:F32:4x4:0.25 h.1.fc.weight:F32:4x4:0.25
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/extra.st 2>&1 | FileCheck %s --check-prefix=EXTRA
// EXTRA: error: the weights file has tensors that no parameter of @forward uses: 'h.1.fc.weight' (wrong file or wrong model?)
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/int.st table:I32:8x4:1 h.0.fc.weight:F32:4x4:0.25
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/int.st 2>&1 | FileCheck %s --check-prefix=INTW
// INTW: error: 'braid.param' op parameter 'table' has integer dtype I32 in the weights file
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/trunc.st table:F32:8x4:0.5 h.0.fc.weight:F32:4x4:0.25 --truncate 4
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/trunc.st 2>&1 | FileCheck %s --check-prefix=TRUNC
// TRUNC: error: {{.*}}trunc.st: tensor 'h.0.fc.weight' data_offsets [128, 192] run past the end of the data (188 bytes); truncated file?
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/lying.st table:F32:8x4:0.5 --header-len 100000
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/lying.st 2>&1 | FileCheck %s --check-prefix=LYING
// LYING: error: {{.*}}lying.st: header length 100000 runs past the end of the file ({{[0-9]+}} bytes); truncated or not a safetensors file
//
// RUN: printf 'abc' > %t/short.st
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/short.st 2>&1 | FileCheck %s --check-prefix=SHORT
// SHORT: error: {{.*}}short.st: file is 3 bytes, too short for the 8-byte header length
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/json.st --raw-header '{"table": {'
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/json.st 2>&1 | FileCheck %s --check-prefix=JSON
// JSON: error: {{.*}}json.st: header is not valid JSON:
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/dtype.st --raw-header '{"table": {"dtype": "Q8", "shape": [1], "data_offsets": [0, 1]}}'
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/dtype.st 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: error: {{.*}}dtype.st: tensor 'table' has unsupported dtype 'Q8' (supported: F64 F32 F16 BF16 I64 I32)
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/size.st --raw-header '{"table": {"dtype": "F32", "shape": [8, 4], "data_offsets": [0, 0]}}'
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/size.st 2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: error: {{.*}}size.st: tensor 'table' has 0 bytes of data but its dtype and shape need 128
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/overlap.st a:F32:2:1 b:F32:2:1 --raw-header '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}' --truncate 0
// RUN: not braid-eval %S/Inputs/tiny.mlir --weights %t/overlap.st 2>&1 | FileCheck %s --check-prefix=OVERLAP
// OVERLAP: error: {{.*}}overlap.st: tensors 'a' and 'b' overlap in the data
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/ids.st ids:I32:2:9
// RUN: not braid-eval %S/Inputs/tiny.mlir --inputs %t/ids.st 2>&1 | FileCheck %s --check-prefix=IDRANGE
// IDRANGE: tiny.mlir:10:8: error: 'braid.embedding' op id 9 at flat position 0 is out of range; expected 0 <= id < 8
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/labels.st labels:I32:2:4
// RUN: not braid-eval %S/Inputs/tiny.mlir --inputs %t/labels.st 2>&1 | FileCheck %s --check-prefix=LABEL
// LABEL: error: 'braid.cross_entropy' op label 4 at flat position 0 is out of range; expected 0 <= label < 4
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/inshape.st ids:I32:3:1
// RUN: not braid-eval %S/Inputs/tiny.mlir --inputs %t/inshape.st 2>&1 | FileCheck %s --check-prefix=INSHAPE
// INSHAPE: error: input 'ids' has shape [3] in the inputs file; @forward expects 'tensor<2xi32>'
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/inkind.st ids:F32:2:1
// RUN: not braid-eval %S/Inputs/tiny.mlir --inputs %t/inkind.st 2>&1 | FileCheck %s --check-prefix=INKIND
// INKIND: error: input 'ids' has dtype F32 in the inputs file; @forward expects 'tensor<2xi32>'
//
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/inname.st tokens:I32:2:1
// RUN: not braid-eval %S/Inputs/tiny.mlir --inputs %t/inname.st 2>&1 | FileCheck %s --check-prefix=INNAME
// INNAME: error: the inputs file has 'tokens', which is not an argument of @forward
//
// Tests that a failed save leaves an existing file untouched.
// RUN: cp %t/good.st %t/keep.st
// RUN: mkdir -p %t/keep.st.tmp
// RUN: not braid-eval %S/Inputs/tiny.mlir --save-weights %t/keep.st 2>&1 | FileCheck %s --check-prefix=SAVE
// SAVE: error: {{.*}}keep.st: cannot write:
// RUN: cmp %t/good.st %t/keep.st
//
// Two arguments of one name are refused (they got one value: the loss of
// a model whose tokens were named 'labels' changed silently), by braid-eval
// and braidc alike.
// RUN: not braid-eval %S/Inputs/duplicate-names.mlir 2>&1 | FileCheck %s --check-prefix=DUPNAME
// RUN: not braidc %S/Inputs/duplicate-names.mlir -o %t/dup 2>&1 | FileCheck %s --check-prefix=DUPNAME
// DUPNAME: duplicate-names.mlir:2:1: error: argument #1 is named 'x' as an earlier argument is; arguments need distinct names (braid.name)
//
// An output in a missing directory, or a directory, is refused before the
// evaluation runs (it was found after, the results printed and lost).
// RUN: not braid-eval %S/Inputs/tiny.mlir --save-weights %t/nodir/w.st > %t/nodir.out 2>&1
// RUN: FileCheck %s --check-prefix=NODIR < %t/nodir.out
// NODIR: error: --save-weights {{.*}}nodir/w.st: cannot write in '{{.*}}nodir' (no such directory, or not writable)
// NODIR-NOT: result
// RUN: not braid-eval %S/Inputs/tiny.mlir --save-outputs %t 2>&1 | FileCheck %s --check-prefix=ISDIR
// ISDIR: error: --save-outputs {{.*}}: is a directory
//
// RUN: not braid-eval 2>&1 | FileCheck %s --check-prefix=USAGE
// USAGE: Not enough positional command line arguments specified!
//
// Tests that declarations of one parameter must agree, and that agreeing
// ones denote the same tensor (tied weights).
// RUN: not braid-eval %S/Inputs/tied.mlir 2>&1 | FileCheck %s --check-prefix=TIED
// TIED: tied.mlir:4:8: error: 'braid.param' op declares parameter 'w' as 'tensor<2xf32>' with #braid.init<zeros>, but it was already declared as 'tensor<4xf32>' with #braid.init<zeros>
// TIED: tied.mlir:3:8: note: first declaration
// RUN: braid-eval %S/Inputs/tied.mlir --entry tied | FileCheck %s --check-prefix=SAMEW
// SAMEW: result 1: tensor<4xf32> sum = 0 l2 = 0{{$}}
//
// Calls (of per-chunk pieces) run the callee; a call with nothing to run is
// an error.
// RUN: %PYTHON %S/Inputs/make_safetensors.py %t/x.st x:F32:2:1.5
// RUN: braid-eval %S/Inputs/call.mlir --inputs %t/x.st --dump | FileCheck %s --check-prefix=CALL
// CALL: result 0: tensor<2xf32> sum = 12 l2
// CALL-NEXT: {{^ +}}6 6{{$}}
// RUN: not braid-eval %S/Inputs/call.mlir --entry bad --inputs %t/x.st 2>&1 | FileCheck %s --check-prefix=EXTERNAL
// EXTERNAL: call.mlir:15:8: error: 'func.call' op calls @external, which has no body for braid-eval to run
