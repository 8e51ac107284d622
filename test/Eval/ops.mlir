// Tests the reference semantics of every op on inputs whose results are
// known in closed form. (PyTorch comparisons on random inputs live in
// python/tests/test_ops_vs_torch.py.)
//
// RUN: braid-eval %s --entry matmul --dump | FileCheck %s --check-prefix=MATMUL
// RUN: braid-eval %s --entry elementwise --dump | FileCheck %s --check-prefix=ELEM
// RUN: braid-eval %s --entry unary --dump | FileCheck %s --check-prefix=UNARY
// RUN: braid-eval %s --entry norms --dump | FileCheck %s --check-prefix=NORM
// RUN: braid-eval %s --entry lookup --dump | FileCheck %s --check-prefix=LOOKUP
// RUN: braid-eval %s --entry attention --dump | FileCheck %s --check-prefix=ATTN
// RUN: braid-eval %s --entry shapes --dump | FileCheck %s --check-prefix=SHAPE
// RUN: braid-eval %s --entry params --dump | FileCheck %s --check-prefix=PARAM
// RUN: braid-eval %s --entry training --dump | FileCheck %s --check-prefix=TRAIN
// RUN: braid-eval %s --entry rounding --dump | FileCheck %s --check-prefix=ROUND
// RUN: braid-eval %s --entry rounding --dump --f64 | FileCheck %s --check-prefix=ROUND64

// MATMUL: result 0: tensor<2x2xf64> sum = 134 l2
// MATMUL-NEXT: {{^ +}}19 22 43 50{{$}}
// MATMUL: result 1: tensor<2x2xf64>
// MATMUL-NEXT: {{^ +}}17 23 39 53{{$}}
// MATMUL: result 2: tensor<2x2xf64>
// MATMUL-NEXT: {{^ +}}26 30 38 44{{$}}
// MATMUL: result 3: tensor<2x1x2xf64>
// MATMUL-NEXT: {{^ +}}1 4 3 8{{$}}
func.func @matmul() -> (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x1x2xf64>) {
  %a = braid.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf64>
  %b = braid.constant dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf64>
  %0 = braid.matmul %a, %b : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %1 = braid.matmul %a, %b {transpose_b} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %2 = braid.matmul %a, %b {transpose_a} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %c = braid.constant dense<[[[1.0, 2.0]], [[3.0, 4.0]]]> : tensor<2x1x2xf64>
  %d = braid.constant dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf64>
  %3 = braid.matmul %c, %d : (tensor<2x1x2xf64>, tensor<2x2xf64>) -> tensor<2x1x2xf64>
  return %0, %1, %2, %3 : tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x1x2xf64>
}

// ELEM: result 0: tensor<2x2xf64>
// ELEM-NEXT: {{^ +}}11 22 13 24{{$}}
// ELEM: result 1: tensor<2x2xf64>
// ELEM-NEXT: {{^ +}}9 18 7 16{{$}}
// ELEM: result 2: tensor<2x2xf64>
// ELEM-NEXT: {{^ +}}2 3 4 6{{$}}
// ELEM: result 3: tensor<2xf64>
// ELEM-NEXT: {{^ +}}0.25 0.5{{$}}
func.func @elementwise() -> (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2xf64>) {
  %a = braid.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf64>
  %v = braid.constant dense<[10.0, 20.0]> : tensor<2xf64>
  %0 = braid.add %a, %v : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xf64>
  %1 = braid.sub %v, %a : (tensor<2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %r = braid.constant dense<[2.0, 3.0]> : tensor<2xf64>
  %c = braid.constant dense<[[1.0], [2.0]]> : tensor<2x1xf64>
  %2 = braid.mul %r, %c : (tensor<2xf64>, tensor<2x1xf64>) -> tensor<2x2xf64>
  %n = braid.constant dense<[1.0, 2.0]> : tensor<2xf64>
  %four = braid.constant dense<4.0> : tensor<1xf64>
  %3 = braid.div %n, %four : (tensor<2xf64>, tensor<1xf64>) -> tensor<2xf64>
  return %0, %1, %2, %3 : tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2xf64>
}

// UNARY: result 0: tensor<2xf64>
// UNARY-NEXT: {{^ +}}-1 2{{$}}
// UNARY: result 1: tensor<2xf64>
// UNARY-NEXT: {{^ +}}1 2.7182818284590451{{$}}
// UNARY: result 2: tensor<2xf64>
// UNARY-NEXT: {{^ +}}2 3{{$}}
// UNARY: result 3: tensor<2xf64>
// UNARY-NEXT: {{^ +}}0.5 0.25{{$}}
// UNARY: result 4: tensor<2xf64>
// UNARY-NEXT: {{^ +}}0 2{{$}}
// UNARY: result 5: tensor<2xf64>
// UNARY-NEXT: {{^ +}}0 0.7310585786300049{{$}}
// UNARY: result 6: tensor<2xf64>
// UNARY-NEXT: {{^ +}}0 0.8413447460685429{{[0-9]*$}}
// UNARY: result 7: tensor<2xf64>
// UNARY-NEXT: {{^ +}}0 0.8411919906082767{{[0-9]*$}}
func.func @unary() -> (tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>,
                       tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>) {
  %x = braid.constant dense<[1.0, -2.0]> : tensor<2xf64>
  %0 = braid.neg %x : tensor<2xf64>
  %e = braid.constant dense<[0.0, 1.0]> : tensor<2xf64>
  %1 = braid.exp %e : tensor<2xf64>
  %s = braid.constant dense<[4.0, 9.0]> : tensor<2xf64>
  %2 = braid.sqrt %s : tensor<2xf64>
  %r = braid.constant dense<[4.0, 16.0]> : tensor<2xf64>
  %3 = braid.rsqrt %r : tensor<2xf64>
  %q = braid.constant dense<[-1.0, 2.0]> : tensor<2xf64>
  %4 = braid.relu %q : tensor<2xf64>
  %5 = braid.silu %e : tensor<2xf64>
  %6 = braid.gelu exact %e : tensor<2xf64>
  %7 = braid.gelu tanh %e : tensor<2xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>,
                                         tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>
}

// NORM: result 0: tensor<2x2xf64>
// NORM-NEXT: {{^ +}}0.5 0.5 0.5 0.5{{$}}
// NORM: result 1: tensor<2x2xf64>
// NORM-NEXT: {{^ +}}0.5 0.5 0.5 0.5{{$}}
// NORM: result 2: tensor<2xf64>
// NORM-NEXT: {{^ +}}-1 4{{$}}
// NORM: result 3: tensor<4xf64>
// NORM-NEXT: {{^ +}}1 2 3 4{{$}}
func.func @norms() -> (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2xf64>, tensor<4xf64>) {
  %a = braid.constant dense<[[0.0, 0.0], [5.0, 5.0]]> : tensor<2x2xf64>
  %0 = braid.softmax %a {axis = 1 : i64} : tensor<2x2xf64>
  %b = braid.constant dense<[[0.0, 1.0], [0.0, 1.0]]> : tensor<2x2xf64>
  %1 = braid.softmax %b {axis = 0 : i64} : tensor<2x2xf64>
  %x = braid.constant dense<[1.0, 3.0]> : tensor<2xf64>
  %g = braid.constant dense<[2.0, 3.0]> : tensor<2xf64>
  %bias = braid.constant dense<[1.0, 1.0]> : tensor<2xf64>
  %2 = braid.layer_norm %x, %g, %bias {epsilon = 0.0 : f64}
      : (tensor<2xf64>, tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  %y = braid.constant dense<2.0> : tensor<4xf64>
  %h = braid.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf64>
  %3 = braid.rms_norm %y, %h {epsilon = 0.0 : f64} : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  return %0, %1, %2, %3 : tensor<2x2xf64>, tensor<2x2xf64>, tensor<2xf64>, tensor<4xf64>
}

// LOOKUP: result 0: tensor<2x2xf64>
// LOOKUP-NEXT: {{^ +}}4 5 0 1{{$}}
// LOOKUP: result 1: tensor<f64> = 1.3862943611198906{{$}}
// LOOKUP: result 2: tensor<1x2x1x2xf64>
// LOOKUP-NEXT: {{^ +}}1 0 0.5403023058681397{{[0-9]*}} 0.8414709848078965{{[0-9]*$}}
func.func @lookup() -> (tensor<2x2xf64>, tensor<f64>, tensor<1x2x1x2xf64>) {
  %t = braid.constant dense<[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]> : tensor<3x2xf64>
  %ids = braid.constant dense<[2, 0]> : tensor<2xi32>
  %0 = braid.embedding %t, %ids : (tensor<3x2xf64>, tensor<2xi32>) -> tensor<2x2xf64>
  %logits = braid.constant dense<0.0> : tensor<2x4xf64>
  %labels = braid.constant dense<[0, 3]> : tensor<2xi64>
  %1 = braid.cross_entropy %logits, %labels : (tensor<2x4xf64>, tensor<2xi64>) -> tensor<f64>
  // Position 0 is not rotated; position 1 is rotated by 1 radian.
  %x = braid.constant dense<[[[[1.0, 0.0]], [[1.0, 0.0]]]]> : tensor<1x2x1x2xf64>
  %2 = braid.rotary %x : tensor<1x2x1x2xf64>
  return %0, %1, %2 : tensor<2x2xf64>, tensor<f64>, tensor<1x2x1x2xf64>
}

// With q = k = 0 every visible key gets the same weight: the output is the
// mean of the visible values.
// ATTN: result 0: tensor<1x2x2x1xf64>
// ATTN-NEXT: {{^ +}}2 2 2 2{{$}}
// ATTN: result 1: tensor<1x2x2x1xf64>
// ATTN-NEXT: {{^ +}}1 1 2 2{{$}}
func.func @attention() -> (tensor<1x2x2x1xf64>, tensor<1x2x2x1xf64>) {
  %q = braid.constant dense<0.0> : tensor<1x2x2x1xf64>
  %k = braid.constant dense<0.0> : tensor<1x2x1x1xf64>
  %v = braid.constant dense<[[[[1.0]], [[3.0]]]]> : tensor<1x2x1x1xf64>
  %0 = braid.attention %q, %k, %v : (tensor<1x2x2x1xf64>, tensor<1x2x1x1xf64>, tensor<1x2x1x1xf64>) -> tensor<1x2x2x1xf64>
  %1 = braid.attention %q, %k, %v {causal} : (tensor<1x2x2x1xf64>, tensor<1x2x1x1xf64>, tensor<1x2x1x1xf64>) -> tensor<1x2x2x1xf64>
  return %0, %1 : tensor<1x2x2x1xf64>, tensor<1x2x2x1xf64>
}

// SHAPE: result 0: tensor<3x2xf64>
// SHAPE-NEXT: {{^ +}}1 4 2 5 3 6{{$}}
// SHAPE: result 1: tensor<2xf64>
// SHAPE-NEXT: {{^ +}}6 15{{$}}
// SHAPE: result 2: tensor<2x1xf64>
// SHAPE-NEXT: {{^ +}}2 5{{$}}
// SHAPE: result 3: tensor<3xf64>
// SHAPE-NEXT: {{^ +}}4 5 6{{$}}
// SHAPE: result 4: tensor<2x2x3xf64>
// SHAPE-NEXT: {{^ +}}1 2 3 4 5 6 1 2{{$}}
// SHAPE-NEXT: {{^ +}}3 4 5 6{{$}}
// SHAPE: result 5: tensor<1x2xf64>
// SHAPE-NEXT: {{^ +}}4 6{{$}}
// SHAPE: result 6: tensor<2x4xf64>
// SHAPE-NEXT: {{^ +}}1 2 3 9 4 5 6 9{{$}}
// SHAPE: result 7: tensor<6xf64>
// SHAPE-NEXT: {{^ +}}1 2 3 4 5 6{{$}}
func.func @shapes() -> (tensor<3x2xf64>, tensor<2xf64>, tensor<2x1xf64>, tensor<3xf64>,
                        tensor<2x2x3xf64>, tensor<1x2xf64>, tensor<2x4xf64>, tensor<6xf64>) {
  %x = braid.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf64>
  %0 = braid.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3xf64>) -> tensor<3x2xf64>
  %1 = braid.reduce sum %x {axes = array<i64: 1>} : (tensor<2x3xf64>) -> tensor<2xf64>
  %2 = braid.reduce mean %x {axes = array<i64: 1>, keep_dims} : (tensor<2x3xf64>) -> tensor<2x1xf64>
  %3 = braid.reduce max %x {axes = array<i64: 0>} : (tensor<2x3xf64>) -> tensor<3xf64>
  %4 = braid.broadcast %x : (tensor<2x3xf64>) -> tensor<2x2x3xf64>
  %5 = braid.slice %x {start = array<i64: 1, 0>, limit = array<i64: 2, 3>, stride = array<i64: 1, 2>}
      : (tensor<2x3xf64>) -> tensor<1x2xf64>
  %nine = braid.constant dense<9.0> : tensor<2x1xf64>
  %6 = braid.concat %x, %nine {axis = 1 : i64} : (tensor<2x3xf64>, tensor<2x1xf64>) -> tensor<2x4xf64>
  %7 = braid.reshape %x : (tensor<2x3xf64>) -> tensor<6xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<3x2xf64>, tensor<2xf64>, tensor<2x1xf64>, tensor<3xf64>,
                                         tensor<2x2x3xf64>, tensor<1x2xf64>, tensor<2x4xf64>, tensor<6xf64>
}

// Tests parameters and layers: each instance of @addc adds its own
// constant-initialised parameter, so three instances add 3 * 0.5.
// PARAM: result 0: tensor<2xf64>
// PARAM-NEXT: {{^ +}}2.5 3.5{{$}}
// PARAM: result 1: tensor<2xf64>
// PARAM-NEXT: {{^ +}}1 1{{$}}
braid.layer @addc(%x: tensor<2xf64>) -> tensor<2xf64> {
  %c = braid.param "c" {init = #braid.init<constant(0.5)>} : tensor<2xf64>
  %y = braid.add %x, %c : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  braid.yield %y : tensor<2xf64>
}
func.func @params() -> (tensor<2xf64>, tensor<2xf64>) {
  %x = braid.constant dense<[1.0, 2.0]> : tensor<2xf64>
  %0 = braid.repeat @addc(%x) {prefix = "h", count = 3 : i64} : (tensor<2xf64>) -> tensor<2xf64>
  %1 = braid.param "ones" {init = #braid.init<ones>} : tensor<2xf64>
  return %0, %1 : tensor<2xf64>, tensor<2xf64>
}

// Tests that results are rounded to their element type (1 + 2^-30 is not
// representable in f32 or bf16), and kept with --f64.
// ROUND: result 0: tensor<2xf32>
// ROUND-NEXT: {{^ +}}1 1{{$}}
// ROUND: result 1: tensor<2xbf16>
// ROUND-NEXT: {{^ +}}1 1.0078125{{$}}
// ROUND64: result 0: tensor<2xf32>
// ROUND64-NEXT: {{^ +}}1.0000000009313226 1{{$}}
func.func @rounding() -> (tensor<2xf32>, tensor<2xbf16>) {
  %a = braid.constant dense<[1.0, 0.0]> : tensor<2xf32>
  %b = braid.constant dense<[9.3132257461547852E-10, 1.0]> : tensor<2xf32>
  %0 = braid.add %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %c = braid.constant dense<[1.0, 1.0078125]> : tensor<2xbf16>
  %d = braid.constant dense<[0.001, 0.0]> : tensor<2xbf16>
  %1 = braid.add %c, %d : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
  return %0, %1 : tensor<2xf32>, tensor<2xbf16>
}

// Tests the training ops on values with closed-form results (to within an
// ulp or two, as the order of operations may differ): warm-up over 4
// steps then cosine decay to 0 over steps 4..12 (half-way at step 8), the
// global norm of [3, 4] and [12] (and its square), a clip that does not bind, one AdamW step
// (p = 1, g = 2, lr = 0.1: m = 0.2, v = 0.004, p = 1 - 0.1 * 2 / (2 + 1e-8))
// and one Nesterov SGD step (buf = 0.9 * 0.5 + 2 = 2.45,
// p = 1 - 0.1 * (2 + 0.9 * 2.45) = 0.5795).
// TRAIN: result 0: tensor<f64> = 0.25{{$}}
// TRAIN: result 1: tensor<f64> = 0.5{{$}}
// TRAIN: result 2: tensor<f64> = 13{{$}}
// TRAIN: result 3: tensor<f64> = 169{{$}}
// TRAIN: result 4: tensor<f64> = 1{{$}}
// TRAIN: result 5: tensor<1xf64>
// TRAIN-NEXT: {{^ +}}0.900000000{{49999|50000}}{{[0-9]*$}}
// TRAIN: result 6: tensor<1xf64>
// TRAIN-NEXT: {{^ +}}{{0.19999999999999|0.20000000000000}}{{[0-9]*$}}
// TRAIN: result 7: tensor<1xf64>
// TRAIN-NEXT: {{^ +}}{{0.0039999999999999|0.0040000000000000}}{{[0-9]*$}}
// TRAIN: result 8: tensor<1xf64>
// TRAIN-NEXT: {{^ +}}0.579{{4999999999999[0-9]*|5|50000000000000[0-9]*}}{{$}}
// TRAIN: result 9: tensor<1xf64>
// TRAIN-NEXT: {{^ +}}2.4{{5|50000000000000[0-9]*|4999999999999[0-9]*}}{{$}}
func.func @training() -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<1xf64>,
                          tensor<1xf64>, tensor<1xf64>, tensor<1xf64>, tensor<1xf64>) {
  %s0 = braid.constant dense<0> : tensor<i64>
  %s8 = braid.constant dense<8> : tensor<i64>
  %0 = braid.lr_schedule cosine %s0 {lr = 1.0 : f64, warmup_steps = 4 : i64, total_steps = 12 : i64} : (tensor<i64>) -> tensor<f64>
  %1 = braid.lr_schedule cosine %s8 {lr = 1.0 : f64, warmup_steps = 4 : i64, total_steps = 12 : i64} : (tensor<i64>) -> tensor<f64>
  %a = braid.constant dense<[3.0, 4.0]> : tensor<2xf64>
  %b = braid.constant dense<[12.0]> : tensor<1xf64>
  %2 = braid.global_norm %a, %b : (tensor<2xf64>, tensor<1xf64>) -> tensor<f64>
  %sq = braid.sum_squares %a, %b : (tensor<2xf64>, tensor<1xf64>) -> tensor<f64>
  %3 = braid.clip_coefficient %2 {max_norm = 100.0 : f64} : tensor<f64>
  %p = braid.constant dense<1.0> : tensor<1xf64>
  %g = braid.constant dense<2.0> : tensor<1xf64>
  %z = braid.constant dense<0.0> : tensor<1xf64>
  %lr = braid.constant dense<0.1> : tensor<f64>
  %one = braid.constant dense<1.0> : tensor<f64>
  %4, %5, %6 = braid.adamw_update %p, %g, %z, %z, %lr, %s0, %one {weight_decay = 0.0 : f64}
      : (tensor<1xf64>, tensor<1xf64>, tensor<1xf64>, tensor<1xf64>, tensor<f64>, tensor<i64>, tensor<f64>)
      -> (tensor<1xf64>, tensor<1xf64>, tensor<1xf64>)
  %buf = braid.constant dense<0.5> : tensor<1xf64>
  %7, %8 = braid.sgd_update %p, %g, %buf, %lr, %one {momentum = 0.9 : f64, nesterov}
      : (tensor<1xf64>, tensor<1xf64>, tensor<1xf64>, tensor<f64>, tensor<f64>) -> (tensor<1xf64>, tensor<1xf64>)
  return %0, %1, %2, %sq, %3, %4, %5, %6, %7, %8 : tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<1xf64>,
                                             tensor<1xf64>, tensor<1xf64>, tensor<1xf64>, tensor<1xf64>
}
