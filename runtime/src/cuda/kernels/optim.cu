//===- optim.cu - Learning-rate schedule, norms, optimizers on CUDA -------===//
//
// Rank-0 operands (lr, step, grad_scale, norm) are device memory, read by
// the kernels themselves: nothing returns to the host.
//
//===----------------------------------------------------------------------===//

#include "backend.h"
#include "ops.h"

using namespace braid_rt_cuda;

void braid_rt_lr_schedule_f32(braid_rt_stream_t *stream, const int32_t *step,
                              braid_rt_lr_decay_t decay, double lr,
                              double min_lr, int64_t warmup_steps,
                              int64_t total_steps, float *out) {
  CudaBackend backend(stream);
  ops::lrSchedule(backend, step, decay, lr, min_lr, warmup_steps, total_steps,
                  out);
}

void braid_rt_lr_schedule_f32_i64(braid_rt_stream_t *stream,
                                  const int64_t *step,
                                  braid_rt_lr_decay_t decay, double lr,
                                  double min_lr, int64_t warmup_steps,
                                  int64_t total_steps, float *out) {
  CudaBackend backend(stream);
  ops::lrSchedule(backend, step, decay, lr, min_lr, warmup_steps, total_steps,
                  out);
}

void braid_rt_global_norm_f32(braid_rt_stream_t *stream,
                              const float *const *inputs, const int64_t *counts,
                              int64_t num_inputs, float *out) {
  CudaBackend backend(stream);
  ops::sumSquares(backend, inputs, counts, num_inputs, /*root=*/true, out);
}

void braid_rt_sum_squares_f32(braid_rt_stream_t *stream,
                              const float *const *inputs, const int64_t *counts,
                              int64_t num_inputs, float *out) {
  CudaBackend backend(stream);
  ops::sumSquares(backend, inputs, counts, num_inputs, /*root=*/false, out);
}

void braid_rt_clip_coefficient_f32(braid_rt_stream_t *stream, const float *norm,
                                   double max_norm, float *out) {
  CudaBackend backend(stream);
  ops::clipCoefficient(backend, norm, max_norm, out);
}

void braid_rt_select_f32(braid_rt_stream_t *stream, const float *condition,
                         const float *on_true, const float *on_false,
                         int64_t count, float *out) {
  CudaBackend backend(stream);
  backend.forEach(count, [=] BRAID_HD(int64_t i) {
    out[i] = *condition != 0.0f ? on_true[i] : on_false[i];
  });
}

void braid_rt_adamw_update_f32(braid_rt_stream_t *stream, const float *param,
                               const float *grad, const float *m,
                               const float *v, const float *lr,
                               const int32_t *step, const float *grad_scale,
                               int64_t count, double beta1, double beta2,
                               double epsilon, double weight_decay,
                               float *new_param, float *new_m, float *new_v) {
  CudaBackend backend(stream);
  ops::adamwUpdate(backend, param, grad, m, v, lr, step, grad_scale, count,
                   beta1, beta2, epsilon, weight_decay, new_param, new_m,
                   new_v);
}

void braid_rt_adamw_update_f32_i64(braid_rt_stream_t *stream,
                                   const float *param, const float *grad,
                                   const float *m, const float *v,
                                   const float *lr, const int64_t *step,
                                   const float *grad_scale, int64_t count,
                                   double beta1, double beta2, double epsilon,
                                   double weight_decay, float *new_param,
                                   float *new_m, float *new_v) {
  CudaBackend backend(stream);
  ops::adamwUpdate(backend, param, grad, m, v, lr, step, grad_scale, count,
                   beta1, beta2, epsilon, weight_decay, new_param, new_m,
                   new_v);
}

void braid_rt_sgd_update_f32(braid_rt_stream_t *stream, const float *param,
                             const float *grad, const float *momentum_buffer,
                             const float *lr, const float *grad_scale,
                             int64_t count, double momentum, int nesterov,
                             double weight_decay, float *new_param,
                             float *new_momentum_buffer) {
  CudaBackend backend(stream);
  ops::sgdUpdate(backend, param, grad, momentum_buffer, lr, grad_scale, count,
                 momentum, nesterov, weight_decay, new_param,
                 new_momentum_buffer);
}
