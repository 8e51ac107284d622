// RUN: braid-opt %s -split-input-file -verify-diagnostics

// Tests that dynamic shapes are rejected.
func.func @dynamic(%x: tensor<?x4xf32>) {
  // expected-error@+1 {{operand #0 has type 'tensor<?x4xf32>' with a dynamic dimension; braid needs static shapes}}
  %0 = braid.relu %x : tensor<?x4xf32>
  return
}

// -----

// Tests that a misspelt attribute is not silently ignored.
func.func @unknown_attribute(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {
  // expected-error@+1 {{has unknown attribute 'transpose_c'; known attributes: transpose_a, transpose_b}}
  %0 = braid.matmul %a, %b {transpose_c} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

// Tests that unknown dialect attributes are rejected.
func.func @unknown_braid_attribute(%a: tensor<2xf32>) {
  // expected-error@+1 {{unknown braid attribute 'braid.shard'}}
  %0 = braid.relu %a {braid.shard = 1} : tensor<2xf32>
  return
}

// -----

// Tests that braid.range applies only to integer arguments.
// expected-error@+1 {{argument #0: braid.range applies to integer tensors, not 'tensor<2xf32>'}}
func.func @range_on_float(%a: tensor<2xf32> {braid.range = 4 : i64}) {
  return
}

// -----

// Tests that braid.range must be positive.
// expected-error@+1 {{argument #0: braid.range must be a positive integer}}
func.func @range_zero(%a: tensor<2xi32> {braid.range = 0 : i64}) {
  return
}

// -----

// Tests that braid.name must be a string.
// expected-error@+1 {{argument #0: braid.name must be a string}}
func.func @name_not_string(%a: tensor<2xi32> {braid.name = 3 : i64}) {
  return
}

// -----

// Tests that braid.data names a --data role.
// expected-error@+1 {{argument #0: braid.data must be "tokens" or "labels"}}
func.func @data_role(%a: tensor<2xi64> {braid.data = "targets"}) {
  return
}

// -----

// Tests that braid.data applies only to integer arguments.
// expected-error@+1 {{argument #0: braid.data applies to integer tensors, not 'tensor<2xf32>'}}
func.func @data_on_float(%a: tensor<2xf32> {braid.data = "tokens"}) {
  return
}

// -----

// Tests that unknown argument attributes are rejected.
// expected-error@+1 {{argument #0: unknown braid attribute 'braid.vocab'; known: braid.name, braid.range, braid.data}}
func.func @unknown_arg_attribute(%a: tensor<2xi32> {braid.vocab = 3 : i64}) {
  return
}

// -----

func.func @unknown_init() {
  // expected-error@+1 {{unknown initializer 'gaussian'; expected zeros, ones, constant(c), normal(std) or uniform(lo, hi)}}
  %0 = braid.param "w" {init = #braid.init<gaussian(1.0)>} : tensor<2xf32>
  return
}

// -----

func.func @normal_std() {
  // expected-error@+1 {{normal initializer needs a positive standard deviation, got 0}}
  %0 = braid.param "w" {init = #braid.init<normal(0.0)>} : tensor<2xf32>
  return
}

// -----

func.func @uniform_bounds() {
  // expected-error@+1 {{uniform initializer needs lo < hi, got [1.000000e+00, 1.000000e+00)}}
  %0 = braid.param "w" {init = #braid.init<uniform(1.0, 1.0)>} : tensor<2xf32>
  return
}

// -----

func.func @init_missing_argument() {
  // expected-error@+1 {{expected '('}}
  %0 = braid.param "w" {init = #braid.init<normal>} : tensor<2xf32>
  return
}

// -----

func.func @param_empty_name() {
  // expected-error@+1 {{parameter name must not be empty}}
  %0 = braid.param "" {init = #braid.init<zeros>} : tensor<2xf32>
  return
}

// -----

func.func @param_space() {
  // expected-error@+1 {{parameter name 'a b' must not contain whitespace or quotes}}
  %0 = braid.param "a b" {init = #braid.init<zeros>} : tensor<2xf32>
  return
}

// -----

func.func @param_integer() {
  // expected-error@+1 {{result #0 must be ranked tensor of 64-bit float or 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = braid.param "ids" {init = #braid.init<zeros>} : tensor<2xi32>
  return
}

// -----

func.func @param_missing_init() {
  // expected-error@+1 {{requires attribute 'init'}}
  %0 = braid.param "w" : tensor<2xf32>
  return
}

// -----

// expected-error@+1 {{must be directly inside a braid.layer or a function}}
%0 = braid.param "w" {init = #braid.init<zeros>} : tensor<2xf32>

// -----

braid.layer @wrong_yield(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = braid.constant dense<1.0> : tensor<3xf32>
  // expected-error@+1 {{yields 1 value(s) of types ('tensor<3xf32>') but layer @wrong_yield declares results ('tensor<2xf32>')}}
  braid.yield %0 : tensor<3xf32>
}

// -----

func.func @yield_outside(%x: tensor<2xf32>) {
  // expected-error@+1 {{expects parent op to be one of 'braid.layer, braid.fused'}}
  braid.yield %x : tensor<2xf32>
}

// -----

braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_count(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{count must be at least 1, got 0}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 0 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_first(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{first must be non-negative, got -1}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 1 : i64, first = -1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_prefix(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{prefix 'a b' must not contain spaces}}
  %0 = braid.repeat @id(%x) {prefix = "a b", count = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that instance_names needs one name per instance.
braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_instance_count(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{has 1 instance_names for 2 instance(s)}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 2 : i64, instance_names = ["a"]} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that instance names are distinct.
braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_instance_twice(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{instance name 'a' is given twice}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 2 : i64, instance_names = ["a", "a"]} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that an instance name is one component of a dotted name.
braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_instance_dot(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{instance name 'a.b' must be non-empty, without dots or spaces}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 1 : i64, instance_names = ["a.b"]} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that instance names need a prefix (without one, instances share parameters).
braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_instance_no_prefix(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{has instance_names but no prefix}}
  %0 = braid.repeat @id(%x) {count = 1 : i64, instance_names = ["a"]} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that instance_names is an array of strings.
braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_instance_type(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{attribute 'instance_names' failed to satisfy constraint: string array attribute}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 1 : i64, instance_names = [1 : i64]} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @repeat_unknown(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{'nope' does not name a braid.layer}}
  %0 = braid.repeat @nope(%x) {prefix = "h", count = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

braid.layer @grow(%x: tensor<2xf32>) -> tensor<4xf32> {
  %0 = braid.concat %x, %x {axis = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  braid.yield %0 : tensor<4xf32>
}
func.func @repeat_not_square(%x: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{layer @grow cannot be repeated: its result types must equal its argument types}}
  %0 = braid.repeat @grow(%x) {prefix = "h", count = 1 : i64} : (tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_operands(%x: tensor<3xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{operand types do not match layer @id; expected ('tensor<2xf32>')}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 1 : i64} : (tensor<3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

braid.layer @id(%x: tensor<2xf32>) -> tensor<2xf32> {
  braid.yield %x : tensor<2xf32>
}
func.func @repeat_results(%x: tensor<2xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{result types do not match layer @id; expected ('tensor<2xf32>')}}
  %0 = braid.repeat @id(%x) {prefix = "h", count = 1 : i64} : (tensor<2xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x2xf32>) {
  // expected-error@+1 {{operands must have rank >= 2, got ranks 1 and 2}}
  %0 = braid.matmul %a, %b : (tensor<4xf32>, tensor<4x2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<3x4xf32>, %b: tensor<5x2xf32>) {
  // expected-error@+1 {{contracting dimensions differ: lhs [3, 4] has K = 4 but rhs [5, 2] has K = 5}}
  %0 = braid.matmul %a, %b : (tensor<3x4xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x2xf32>) {
  // expected-error@+1 {{batch dimensions [2] and [3] do not broadcast}}
  %0 = braid.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x2xf32>) -> tensor<2x3x2xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) {
  // expected-error@+1 {{result type 'tensor<3x3xf32>' does not match the inferred type 'tensor<3x2xf32>'}}
  %0 = braid.matmul %a, %b : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @matmul_mixed(%a: tensor<3x4xf32>, %b: tensor<4x2xf16>) {
  // expected-error@+1 {{mixes element types 'f32' and 'f16'; all floating-point operands and results must share one element type}}
  %0 = braid.matmul %a, %b : (tensor<3x4xf32>, tensor<4x2xf16>) -> tensor<3x2xf32>
  return
}

// -----

// Tests that braid.matmul_bias's bias is one vector of the result's last
// dimension.
func.func @matmul_bias_length(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias must be [16] (the result's last dimension), got [8]}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that braid.matmul_bias's bias is not a row broadcast as [1, n].
func.func @matmul_bias_rank(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<1x16xf32>) {
  // expected-error @+1 {{bias must be [16] (the result's last dimension), got [1, 16]}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<1x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that a batched braid.matmul_bias's bias is the result's last
// dimension, not its batch or rows.
func.func @matmul_bias_batched(%x: tensor<2x8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias must be [16] (the result's last dimension), got [8]}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<2x8x32xf32>, tensor<32x16xf32>, tensor<8xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that braid.matmul_bias's bias has the operands' element type.
func.func @matmul_bias_type(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf16>) {
  // expected-error @+1 {{mixes element types}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<16xf16>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that braid.matmul_bias's GELU is the tanh approximation only.
func.func @matmul_bias_exact(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{takes tanh GELU only (cuBLASLt's GELU epilogue)}}
  %h = braid.matmul_bias %x, %w, %b gelu exact : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that braid.matmul_bias checks its operands as braid.matmul does.
func.func @matmul_bias_contracting(%x: tensor<8x32xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{contracting dimensions differ}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<8x32xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @add_broadcast(%a: tensor<3x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{operand shapes [3, 4] and [3] do not broadcast}}
  %0 = braid.add %a, %b : (tensor<3x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @mul_result(%a: tensor<3x4xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{result type 'tensor<4xf32>' does not match the inferred type 'tensor<3x4xf32>'}}
  %0 = braid.mul %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unary_type(%a: tensor<3xf32>) {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = "braid.exp"(%a) : (tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unary_integer(%a: tensor<3xi32>) {
  // expected-error@+1 {{operand #0 must be ranked tensor of 64-bit float or 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = braid.sqrt %a : tensor<3xi32>
  return
}

// -----

func.func @gelu_mode(%a: tensor<3xf32>) {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'approximate' [exact, tanh]}}
  %0 = braid.gelu erf %a : tensor<3xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<3x4xf32>) {
  // expected-error@+1 {{axis 2 is out of range for rank 2; expected 0 <= axis < 2}}
  %0 = braid.softmax %a {axis = 2 : i64} : tensor<3x4xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x8xf32>, %g: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error@+1 {{scale has shape [4]; expected [8] (the last dimension of the input)}}
  %0 = braid.layer_norm %x, %g, %b : (tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error@+1 {{bias has shape [2, 8]; expected [8] (the last dimension of the input)}}
  %0 = braid.layer_norm %x, %g, %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error@+1 {{epsilon must be non-negative}}
  %0 = braid.layer_norm %x, %g, %g {epsilon = -1.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error@+1 {{result type 'tensor<8xf32>' does not match the inferred type 'tensor<2x8xf32>'}}
  %0 = braid.layer_norm %x, %g, %g : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @rms_norm_scale(%x: tensor<2x8xf32>, %g: tensor<2xf32>) {
  // expected-error@+1 {{scale has shape [2]; expected [8] (the last dimension of the input)}}
  %0 = braid.rms_norm %x, %g : (tensor<2x8xf32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error@+1 {{epsilon must be non-negative}}
  %0 = braid.rms_norm %x, %g {epsilon = -1.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @embedding_table(%t: tensor<10xf32>, %ids: tensor<4xi32>) {
  // expected-error@+1 {{table must have rank 2 ([vocab, hidden]), got [10]}}
  %0 = braid.embedding %t, %ids : (tensor<10xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @embedding_result(%t: tensor<10x3xf32>, %ids: tensor<4xi32>) {
  // expected-error@+1 {{result type 'tensor<4x10xf32>' does not match the inferred type 'tensor<4x3xf32>'}}
  %0 = braid.embedding %t, %ids : (tensor<10x3xf32>, tensor<4xi32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @embedding_float_ids(%t: tensor<10x3xf32>, %ids: tensor<4xf32>) {
  // expected-error@+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = braid.embedding %t, %ids : (tensor<10x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<2x8x16xf32>) {
  // expected-error@+1 {{input must be [batch, seq, heads, head_dim], got [2, 8, 16]}}
  %0 = braid.rotary %x : tensor<2x8x16xf32>
  return
}

// -----

func.func @rotary_odd(%x: tensor<2x8x4x7xf32>) {
  // expected-error@+1 {{head dimension 7 must be even to rotate pairs}}
  %0 = braid.rotary %x : tensor<2x8x4x7xf32>
  return
}

// -----

func.func @rotary_base(%x: tensor<2x8x4x8xf32>) {
  // expected-error@+1 {{base must be positive}}
  %0 = braid.rotary %x {base = 0.0 : f64} : tensor<2x8x4x8xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x8x32xf32>) {
  // expected-error@+1 {{query, key and value must be [batch, seq, heads, head_dim]}}
  %0 = braid.attention %q, %q, %q : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @attention_value(%q: tensor<2x8x4x8xf32>, %k: tensor<2x8x4x8xf32>, %v: tensor<2x4x4x8xf32>) {
  // expected-error@+1 {{value has shape [2, 4, 4, 8]; expected the key's shape [2, 8, 4, 8]}}
  %0 = braid.attention %q, %k, %v : (tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x8x4x8xf32>
  return
}

// -----

func.func @attention_key(%q: tensor<2x8x4x8xf32>, %k: tensor<2x8x4x16xf32>) {
  // expected-error@+1 {{key shape [2, 8, 4, 16] does not fit query [2, 8, 4, 8]; expected [2, T, Hkv, 8]}}
  %0 = braid.attention %q, %k, %k : (tensor<2x8x4x8xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x8xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x8x4x8xf32>, %k: tensor<2x8x3x8xf32>) {
  // expected-error@+1 {{query heads (4) must be a multiple of key/value heads (3)}}
  %0 = braid.attention %q, %k, %k : (tensor<2x8x4x8xf32>, tensor<2x8x3x8xf32>, tensor<2x8x3x8xf32>) -> tensor<2x8x4x8xf32>
  return
}

// -----

func.func @attention_causal(%q: tensor<2x8x4x8xf32>, %k: tensor<2x6x4x8xf32>) {
  // expected-error@+1 {{causal attention needs equal query and key lengths, got 8 and 6}}
  %0 = braid.attention %q, %k, %k {causal} : (tensor<2x8x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) -> tensor<2x8x4x8xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x8x4x8xf32>) {
  // expected-error@+1 {{scale must be positive}}
  %0 = braid.attention %q, %q, %q {scale = -1.0 : f64} : (tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>) -> tensor<2x8x4x8xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x8x4x8xf32>) {
  // expected-error@+1 {{result type 'tensor<2x8x32xf32>' does not match the inferred type 'tensor<2x8x4x8xf32>'}}
  %0 = braid.attention %q, %q, %q : (tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @cross_entropy_rank(%l: tensor<f32>, %y: tensor<i32>) {
  // expected-error@+1 {{logits must have rank >= 1 ([..., vocab])}}
  %0 = braid.cross_entropy %l, %y : (tensor<f32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<2x8x16xf32>, %y: tensor<2x16xi32>) {
  // expected-error@+1 {{labels have shape [2, 16]; expected [2, 8] (the logits' shape without the vocabulary)}}
  %0 = braid.cross_entropy %l, %y : (tensor<2x8x16xf32>, tensor<2x16xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_result(%l: tensor<2x8x16xf32>, %y: tensor<2x8xi32>) {
  // expected-error@+1 {{result type 'tensor<2x8xf32>' does not match the inferred type 'tensor<f32>'}}
  %0 = braid.cross_entropy %l, %y : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{cannot reshape [2, 3] (6 elements) to [7] (7 elements)}}
  %0 = braid.reshape %x : (tensor<2x3xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @reshape_type(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{result element type 'f16' differs from the input's 'f32'}}
  %0 = braid.reshape %x : (tensor<2x3xf32>) -> tensor<6xf16>
  return
}

// -----

func.func @transpose_length(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{permutation has 3 entries; expected 2}}
  %0 = braid.transpose %x {permutation = array<i64: 0, 1, 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{permutation [1, 1] is not a permutation of 0..1}}
  %0 = braid.transpose %x {permutation = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{result type 'tensor<2x3xf32>' does not match the inferred type 'tensor<3x2xf32>'}}
  %0 = braid.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_empty(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{needs at least one axis to reduce}}
  %0 = braid.reduce sum %x {axes = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_range(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{axis 2 is out of range for rank 2; expected 0 <= axis < 2}}
  %0 = braid.reduce sum %x {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_twice(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{axis 1 appears twice}}
  %0 = braid.reduce max %x {axes = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_result(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{result type 'tensor<2xf32>' does not match the inferred type 'tensor<2x1xf32>'}}
  %0 = braid.reduce mean %x {axes = array<i64: 1>, keep_dims} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @broadcast_shape(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{cannot broadcast [2, 3] to [3, 3]}}
  %0 = braid.broadcast %x : (tensor<2x3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @broadcast_shrink(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{cannot broadcast [2, 3] to [3]}}
  %0 = braid.broadcast %x : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @slice_entries(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{start, limit and stride need 2 entries each (the input rank)}}
  %0 = braid.slice %x {start = array<i64: 0>, limit = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{stride 0 in dimension 1 must be positive}}
  %0 = braid.slice %x {start = array<i64: 0, 0>, limit = array<i64: 2, 3>, stride = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{dimension 1: need 0 <= start (0) <= limit (4) <= size (3)}}
  %0 = braid.slice %x {start = array<i64: 0, 0>, limit = array<i64: 2, 4>} : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_result(%x: tensor<2x6xf32>) {
  // expected-error@+1 {{result type 'tensor<2x2xf32>' does not match the inferred type 'tensor<2x3xf32>'}}
  %0 = braid.slice %x {start = array<i64: 0, 0>, limit = array<i64: 2, 6>, stride = array<i64: 1, 2>} : (tensor<2x6xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @concat_none() {
  // expected-error@+1 {{needs at least one input}}
  %0 = braid.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_axis(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{axis 2 is out of range for rank 2; expected 0 <= axis < 2}}
  %0 = braid.concat %x, %x {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_type(%x: tensor<2x3xf32>, %y: tensor<2x3xf16>) {
  // expected-error@+1 {{input #1 has element type 'f16'; expected 'f32'}}
  %0 = braid.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_rank(%x: tensor<2x3xf32>, %y: tensor<3xf32>) {
  // expected-error@+1 {{input #1 has rank 1; expected 2}}
  %0 = braid.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_dims(%x: tensor<2x3xf32>, %y: tensor<4x3xf32>) {
  // expected-error@+1 {{input #1 has shape [4, 3]; all dimensions but 1 must equal input #0's [2, 3]}}
  %0 = braid.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_result(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{result type 'tensor<2x5xf32>' does not match the inferred type 'tensor<2x6xf32>'}}
  %0 = braid.concat %x, %x {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @constant_resource() {
  // expected-error@+1 {{value must be a dense<...> elements attribute}}
  %0 = braid.constant dense_resource<blob> : tensor<2xf32>
  return
}

// -----

func.func @store_param_empty(%x: tensor<2xf32>) {
  // expected-error@+1 {{parameter name must not be empty}}
  braid.store_param "", %x : tensor<2xf32>
  return
}

// -----

braid.layer @scan(%acc: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  braid.yield %acc, %x : tensor<4xf32>, tensor<4xf32>
}
func.func @repeat_stacked_count(%g: tensor<4xf32>, %xs: tensor<2x4xf32>) {
  // expected-error@+1 {{operand types do not match layer @scan; expected ('tensor<4xf32>', 'tensor<3x4xf32>')}}
  %a, %b = braid.repeat @scan(%g, %xs) {count = 3 : i64, carried = 1 : i64} : (tensor<4xf32>, tensor<2x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return
}

// -----

braid.layer @scan(%acc: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  braid.yield %acc, %x : tensor<4xf32>, tensor<4xf32>
}
func.func @repeat_carried(%g: tensor<4xf32>, %xs: tensor<3x4xf32>) {
  // expected-error@+1 {{carried (3) must be between 0 and the number of operands and of results}}
  %a, %b = braid.repeat @scan(%g, %xs) {count = 3 : i64, carried = 3 : i64} : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @layer_norm_grad_type(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x4xf32>) {
  // expected-error@+1 {{grad has type 'tensor<2x4xf32>'; expected the input's type 'tensor<2x8xf32>'}}
  %0 = braid.layer_norm_grad %x, %g, %dy : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_grad_scale(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{scale has shape [4]; expected [8] (the last dimension of the input)}}
  %0 = braid.rms_norm_grad %x, %g, %x : (tensor<2x8xf32>, tensor<4xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @embedding_grad_shape(%ids: tensor<2x3xi32>, %dy: tensor<2x3x4xf32>) {
  // expected-error@+1 {{grad has type 'tensor<2x3x4xf32>'; expected 'tensor<2x3x8xf32>'}}
  %0 = braid.embedding_grad %ids, %dy : (tensor<2x3xi32>, tensor<2x3x4xf32>) -> tensor<10x8xf32>
  return
}

// -----

func.func @embedding_grad_rank(%ids: tensor<2x3xi32>, %dy: tensor<2x3x4xf32>) {
  // expected-error@+1 {{result must be a [vocab, hidden] table, got 'tensor<4xf32>'}}
  %0 = braid.embedding_grad %ids, %dy : (tensor<2x3xi32>, tensor<2x3x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @attention_grad_operand(%q: tensor<1x2x2x4xf32>) {
  // expected-error@+1 {{operand must be 0 (query), 1 (key) or 2 (value), got 3}}
  %0 = braid.attention_grad %q, %q, %q, %q {operand = 3 : i64} : (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  return
}

// -----

func.func @attention_grad_result(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x2x4xf32>) {
  // expected-error@+1 {{result type 'tensor<1x2x4x4xf32>' does not match the inferred type 'tensor<1x2x2x4xf32>'}}
  %0 = braid.attention_grad %q, %k, %k, %q {operand = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return
}

// -----

func.func @attention_grad_dy(%q: tensor<1x2x2x4xf32>, %dy: tensor<1x2x2x8xf32>) {
  // expected-error@+1 {{grad has type 'tensor<1x2x2x8xf32>'; expected the query's type 'tensor<1x2x2x4xf32>'}}
  %0 = braid.attention_grad %q, %q, %q, %dy {operand = 0 : i64} : (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x2x4xf32>
  return
}

// -----

func.func @cross_entropy_grad_scalar(%l: tensor<2x5xf32>, %y: tensor<2xi32>, %g: tensor<2xf32>) {
  // expected-error@+1 {{grad must be rank 0 (the gradient of the mean loss)}}
  %0 = braid.cross_entropy_grad %l, %y, %g : (tensor<2x5xf32>, tensor<2xi32>, tensor<2xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @cross_entropy_grad_labels(%l: tensor<2x5xf32>, %y: tensor<5xi32>, %g: tensor<f32>) {
  // expected-error@+1 {{labels must have the logits' shape without the last dimension}}
  %0 = braid.cross_entropy_grad %l, %y, %g : (tensor<2x5xf32>, tensor<5xi32>, tensor<f32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @reduce_max_grad_type(%x: tensor<2x3xf32>, %dy: tensor<3xf32>) {
  // expected-error@+1 {{grad has type 'tensor<3xf32>'; expected 'tensor<2xf32>' (the type of the reduction's result)}}
  %0 = braid.reduce_max_grad %x, %dy {axes = array<i64: 1>} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_grad_type(%dy: tensor<2x2xf32>) {
  // expected-error@+1 {{grad has type 'tensor<2x2xf32>'; expected 'tensor<1x2xf32>' (the slice of the result type)}}
  %0 = braid.slice_grad %dy {start = array<i64: 1, 0>, limit = array<i64: 2, 2>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @lr_schedule_lr(%step: tensor<i64>) {
  // expected-error@+1 {{lr must be positive}}
  %0 = braid.lr_schedule constant %step {lr = 0.0 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_schedule_lr_inf(%step: tensor<i64>) {
  // expected-error@+1 {{lr must be positive and finite}}
  %0 = braid.lr_schedule constant %step {lr = 0x7FF0000000000000 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_schedule_min_lr_nan(%step: tensor<i64>) {
  // expected-error@+1 {{min_lr must be between 0 and lr}}
  %0 = braid.lr_schedule constant %step {lr = 1.0 : f64, min_lr = 0x7FF8000000000000 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_schedule_min(%step: tensor<i64>) {
  // expected-error@+1 {{min_lr must be between 0 and lr}}
  %0 = braid.lr_schedule linear %step {lr = 1.0 : f64, min_lr = 2.0 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_schedule_steps(%step: tensor<i64>) {
  // expected-error@+1 {{need warmup_steps >= 0 and total_steps >= 1, got 0 and 0}}
  %0 = braid.lr_schedule cosine %step {lr = 1.0 : f64, total_steps = 0 : i64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_schedule_step_rank(%step: tensor<2xi64>) {
  // expected-error@+1 {{step must be a rank-0 tensor, got 'tensor<2xi64>'}}
  %0 = braid.lr_schedule constant %step {lr = 1.0 : f64} : (tensor<2xi64>) -> tensor<f32>
  return
}

// -----

func.func @global_norm_none() {
  // expected-error@+1 {{needs at least one input}}
  %0 = braid.global_norm : () -> tensor<f32>
  return
}

// -----

func.func @global_norm_rank(%x: tensor<2xf32>) {
  // expected-error@+1 {{the result must be a rank-0 tensor, got 'tensor<2xf32>'}}
  %0 = braid.global_norm %x : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @select_condition(%c: tensor<2xf32>, %a: tensor<2xf32>) {
  // expected-error@+1 {{needs a rank-0 condition of the result's element type, got 'tensor<2xf32>'}}
  %0 = braid.select %c, %a, %a : tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @clip_max(%n: tensor<f32>) {
  // expected-error@+1 {{max_norm must be positive}}
  %0 = braid.clip_coefficient %n {max_norm = 0.0 : f64} : tensor<f32>
  return
}

// -----

func.func @adamw_beta(%p: tensor<4xf32>, %s: tensor<f32>, %t: tensor<i64>) {
  // expected-error@+1 {{beta1 and beta2 must be in [0, 1)}}
  %a, %b, %c = braid.adamw_update %p, %p, %p, %p, %s, %t, %s {beta1 = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_eps(%p: tensor<4xf32>, %s: tensor<f32>, %t: tensor<i64>) {
  // expected-error@+1 {{needs epsilon > 0 and weight_decay >= 0}}
  %a, %b, %c = braid.adamw_update %p, %p, %p, %p, %s, %t, %s {epsilon = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// NaN passed checks written as x < 0 (braid-train-step's weight-decay=nan
// trained NaN weights).
func.func @adamw_nan_decay(%p: tensor<4xf32>, %s: tensor<f32>, %t: tensor<i64>) {
  // expected-error@+1 {{needs epsilon > 0 and weight_decay >= 0}}
  %a, %b, %c = braid.adamw_update %p, %p, %p, %p, %s, %t, %s {weight_decay = 0x7FF8000000000000 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_nan_momentum(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error@+1 {{needs momentum >= 0 and weight_decay >= 0}}
  %a, %b = braid.sgd_update %p, %p, %p, %s, %s {momentum = 0x7FF8000000000000 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_state_type(%p: tensor<4xf32>, %m: tensor<3xf32>, %s: tensor<f32>, %t: tensor<i64>) {
  // expected-error@+1 {{operand has type 'tensor<3xf32>'; expected the parameter's type 'tensor<4xf32>'}}
  %a, %b, %c = braid.adamw_update %p, %p, %m, %p, %s, %t, %s : (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_lr_rank(%p: tensor<4xf32>, %t: tensor<i64>, %s: tensor<f32>) {
  // expected-error@+1 {{learning rate, step and gradient scale must be a rank-0 tensor, got 'tensor<4xf32>'}}
  %a, %b, %c = braid.adamw_update %p, %p, %p, %p, %p, %t, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error@+1 {{Nesterov momentum needs momentum > 0}}
  %a, %b = braid.sgd_update %p, %p, %p, %s, %s {nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sgd_result(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error@+1 {{result has type 'tensor<2xf32>'; expected the parameter's type 'tensor<4xf32>'}}
  %a, %b = braid.sgd_update %p, %p, %p, %s, %s : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<2xf32>)
  return
}

// -----

func.func @bad_phase(%x: tensor<2xf32>) {
  // expected-error@+1 {{braid.phase must be "F", "B" or "W"}}
  %0 = braid.relu %x {braid.phase = "X"} : tensor<2xf32>
  return
}

// -----

func.func @bad_chunk(%x: tensor<2xf32>) {
  // expected-error@+1 {{braid.chunk must be a non-negative integer}}
  %0 = braid.relu %x {braid.chunk = -1 : i64} : tensor<2xf32>
  return
}

// -----

// expected-error@+1 {{braid.chunk_stages must be an array<i64> of non-negative stage numbers}}
func.func @bad_chunk_stages(%x: tensor<2xf32>) attributes {braid.chunk_stages = [0, 1]} {
  return
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

func.func @start_in_pipeline_blocking(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{braid.start_in_pipeline is a unit attribute of a started collective}}
  %0 = braid.all_reduce sum %x on @mesh ["dp"] {braid.start_in_pipeline} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @bf16_operands_of_bf16(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
  // expected-error@+1 {{braid.bf16_operands is a unit attribute of a braid.matmul of f32 operands}}
  %0 = braid.matmul %x, %x {braid.bf16_operands} : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16>
  return %0 : tensor<2x2xbf16>
}

// -----

func.func @bf16_operands_on_add(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{braid.bf16_operands is a unit attribute of a braid.matmul of f32 operands}}
  %0 = braid.add %x, %x {braid.bf16_operands} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// expected-error@+1 {{result #0: braid.instances must be array<i64: first, count> with first >= 0 and count >= 1}}
func.func @bad_instances(%x: tensor<2xf32>) -> (tensor<2xf32> {braid.instances = array<i64: 0>}) {
  return %x : tensor<2xf32>
}

// -----

func.func @g(%x: tensor<2xf32>) -> tensor<f32> {
  %0 = braid.reduce sum %x {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func @pipeline_mismatch(%x: tensor<3x4xf32>) -> tensor<f32> {
  // expected-error@+1 {{operand types do not match @g over 3 micro-batches; expected ('tensor<3x2xf32>')}}
  %0 = braid.pipeline @g(%x) : (tensor<3x4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @pipeline_ragged(%x: tensor<3x2xf32>, %y: tensor<4x2xf32>) -> tensor<f32> {
  // expected-error@+1 {{operand 1 stacks 4 micro-batches, operand 0 stacks 3}}
  %0 = braid.pipeline @g(%x, %y) : (tensor<3x2xf32>, tensor<4x2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @pipeline_unknown(%x: tensor<3x2xf32>) -> tensor<f32> {
  // expected-error@+1 {{'nope' does not name a function}}
  %0 = braid.pipeline @nope(%x) : (tensor<3x2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @g(%x: tensor<2xf32>) -> tensor<f32> attributes {braid.schedule = {microbatches = 4 : i64, name = "gpipe", ranks = [["F0.0"]]}} {
  %0 = braid.reduce sum %x {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func @pipeline_schedule(%x: tensor<3x2xf32>) -> tensor<f32> {
  // expected-error@+1 {{runs 3 micro-batches, but the schedule of @g has 4}}
  %0 = braid.pipeline @g(%x) : (tensor<3x2xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a fused region holds elementwise and row-wise ops only, and
// that the error lists them (FusibleElementwiseOpInterface,
// RowReductionOpInterface) with their conditions.
func.func @fused_matmul(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = braid.fused (%x) : (tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>):
    // expected-error@+1 {{'braid.matmul' op cannot be in a braid.fused region: only elementwise ops of f32 values (add, convert (f32 to and from bf16), div, exp, gelu (tanh), gelu_grad (tanh), mul, neg, relu, relu_grad, round (to bf16), rsqrt, silu, silu_grad, sqrt, sub) and row-wise ops (cross_entropy (not vocabulary-parallel), cross_entropy_grad (not vocabulary-parallel), layer_norm, layer_norm_grad, rms_norm, rms_norm_grad, softmax (over the last axis)) can}}
    %m = braid.matmul %a, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    braid.yield %m : tensor<2x2xf32>
  }
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that a conversion other than between f32 and bf16 stays out of
// fused regions.
func.func @fused_convert_f16(%x: tensor<2x2xf32>) -> tensor<2x2xf16> {
  %0 = braid.fused (%x) : (tensor<2x2xf32>) -> tensor<2x2xf16> {
  ^bb0(%a: tensor<2x2xf32>):
    // expected-error@+1 {{'braid.convert' op cannot be in a braid.fused region}}
    %c = braid.convert %a : tensor<2x2xf32> to tensor<2x2xf16>
    braid.yield %c : tensor<2x2xf16>
  }
  return %0 : tensor<2x2xf16>
}

// -----

// Tests that exact GELU stays out of fused regions.
func.func @fused_exact_gelu(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = braid.fused (%x) : (tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>):
    // expected-error@+1 {{cannot be in a braid.fused region}}
    %g = braid.gelu exact %a : tensor<2x2xf32>
    braid.yield %g : tensor<2x2xf32>
  }
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that every value of a region has the iteration shape.
func.func @fused_shapes(%x: tensor<2x2xf32>, %y: tensor<2xf32>) -> tensor<2x2xf32> {
  %0 = braid.fused (%x, %y) : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>, %b: tensor<2xf32>):
    // expected-error@+1 {{has result type 'tensor<2xf32>' but the fused region iterates over the shape of 'tensor<2x2xf32>'}}
    %n = braid.neg %b : tensor<2xf32>
    %s = braid.add %a, %n : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    braid.yield %s : tensor<2x2xf32>
  }
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that operands broadcast to the iteration shape.
func.func @fused_broadcast(%x: tensor<2x2xf32>, %y: tensor<3xf32>) -> tensor<2x2xf32> {
  // expected-error@+1 {{operand #1 of type 'tensor<3xf32>' does not broadcast to the iteration shape 'tensor<2x2xf32>'}}
  %0 = braid.fused (%x, %y) : (tensor<2x2xf32>, tensor<3xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>, %b: tensor<3xf32>):
    %n = braid.neg %a : tensor<2x2xf32>
    braid.yield %n : tensor<2x2xf32>
  }
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that the body's arguments are the operands'.
func.func @fused_args(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  // expected-error@+1 {{has 1 operands but its body takes 2 arguments}}
  %0 = braid.fused (%x) : (tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>):
    %n = braid.neg %a : tensor<2x2xf32>
    braid.yield %n : tensor<2x2xf32>
  }
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that an integer operand of a fused region is a row-wise op's labels,
// one per row.
func.func @fused_labels(%x: tensor<2x4xf32>, %l: tensor<2x4xi32>) -> tensor<2x4xf32> {
  // expected-error@+1 {{operand #1 of type 'tensor<2x4xi32>' is an integer tensor, which only a row-wise op's labels may be: one per row of the iteration shape [2x4]}}
  %0 = braid.fused (%x, %l) : (tensor<2x4xf32>, tensor<2x4xi32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<2x4xi32>):
    %n = braid.neg %a : tensor<2x4xf32>
    braid.yield %n : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that a loss, a mean over every row, only leaves a fused region.
func.func @fused_loss_use(%x: tensor<2x4xf32>, %l: tensor<2xi32>) -> tensor<2x4xf32> {
  %0 = braid.fused (%x, %l) : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<2xi32>):
    // expected-error@+1 {{has a result of type 'tensor<f32>' (a mean over all rows) used by braid.mul inside the region; only braid.yield may use it}}
    %loss = braid.cross_entropy %a, %b : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
    %m = braid.mul %a, %loss : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    braid.yield %m : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

func.func @pending_sum_not_scalar() {
  // expected-error@+1 {{braid.pending_sum is a unit attribute of a braid.param or braid.store_param of a rank-0 tensor}}
  %0 = braid.param "s" {init = #braid.init<zeros>, state, braid.pending_sum} : tensor<2xf32>
  return
}

// -----

func.func @pending_sum_on_compute(%x: tensor<f32>) -> tensor<f32> {
  // expected-error@+1 {{braid.pending_sum is a unit attribute of a braid.param or braid.store_param}}
  %0 = braid.sqrt %x {braid.pending_sum} : tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @transient_weight() {
  // expected-error@+1 {{braid.transient is a unit attribute of a braid.param {state}}}
  %0 = braid.param "w" {init = #braid.init<zeros>, braid.transient} : tensor<2xf32>
  return
}
