/*===- compressed_test.c - bf16 / fp16 reductions against exact sums -----===*/
/*
 * The conversions: every 16-bit value survives the round trip, chosen ties
 * go to the even neighbour, and random floats round to a nearest value.
 * The reductions (over the world, count not divisible by the ranks): every
 * element within the bound the ring allows of the exact (double) sum of
 * all ranks' inputs, which every rank recomputes:
 *
 *   |result - sum| <= size * (u + 2^-24) * 1.01 * sum_j |x_j|
 *
 * (u = 2^-8 for bf16, 2^-11 for fp16: size - 1 hops each round a partial
 * sum to 16 bits and add it to f32 values, the all_reduce rounds once
 * more), all_reduce results identical on every rank and representable in
 * the wire format, and some element actually rounded. On 2 ranks the
 * result is also compared bit for bit with the documented order:
 * chunk 0 is R(R(x_1) + x_0), chunk 1 R(R(x_0) + x_1).
 */

#include "test_util.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  const char *name;
  uint16_t (*narrow)(float);
  float (*widen)(uint16_t);
  double u;
  braid_rt_status_t (*all_reduce)(braid_rt_comm_t *, float *, size_t,
                                  braid_rt_stream_t *);
  braid_rt_status_t (*reduce_scatter)(braid_rt_comm_t *, const float *, float *,
                                      size_t, braid_rt_stream_t *);
} format_t;

static int is_nan16(const format_t *f, uint16_t h) {
  return isnan(f->widen(h));
}

static void check_conversions(const format_t *f) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if (is_nan16(f, (uint16_t)h)) {
      CHECK(isnan(f->widen(f->narrow(f->widen((uint16_t)h)))),
            "%s: NaN 0x%04x lost", f->name, h);
      continue;
    }
    uint16_t back = f->narrow(f->widen((uint16_t)h));
    CHECK(back == h, "%s: 0x%04x came back as 0x%04x", f->name, h, back);
  }
  /* Random floats: no representable value is nearer than the rounded one,
     and at an equal distance the rounded one is even. */
  uint64_t state = 7;
  for (int i = 0; i < 200000; ++i) {
    state = braid_rt_splitmix64(state);
    double m = (double)(state % 2000001) / 1e6 - 1.0;
    int e = (int)((state >> 32) % 40) - 30;
    float x = (float)ldexp(m, e);
    uint16_t h = f->narrow(x);
    double got = f->widen(h);
    if (isinf(got))
      continue;
    for (int d = -1; d <= 1; d += 2) {
      uint16_t n = (uint16_t)(h + d);
      if ((n & 0x7fff) == 0x7fff || is_nan16(f, n) || isinf(f->widen(n)))
        continue;
      if (((h ^ n) & 0x8000) != 0) /* across zero: a different sign */
        continue;
      double other = f->widen(n);
      double a = fabs(got - (double)x), b = fabs(other - (double)x);
      CHECK(a < b || (a == b && (h & 1) == 0),
            "%s: %.9g rounded to %.9g (0x%04x), but %.9g is nearer or an "
            "even tie",
            f->name, (double)x, got, h, other);
    }
  }
}

static void check_ties(void) {
  CHECK(braid_rt_f32_to_bf16(1.0f) == 0x3f80, "bf16(1)");
  CHECK(braid_rt_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "bf16 tie to even");
  CHECK(braid_rt_f32_to_bf16(1.0f + 0x3p-8f) == 0x3f82, "bf16 tie to even");
  CHECK(braid_rt_f32_to_bf16(INFINITY) == 0x7f80, "bf16(inf)");
  CHECK(braid_rt_f32_to_bf16(3.4028235e38f) == 0x7f80, "bf16 overflow");
  CHECK(isnan(braid_rt_bf16_to_f32(braid_rt_f32_to_bf16(NAN))), "bf16 NaN");
  CHECK(braid_rt_f32_to_f16(1.0f) == 0x3c00, "f16(1)");
  CHECK(braid_rt_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00, "f16 tie to even");
  CHECK(braid_rt_f32_to_f16(1.0f + 0x3p-11f) == 0x3c02, "f16 tie to even");
  CHECK(braid_rt_f32_to_f16(65504.0f) == 0x7bff, "f16 max");
  CHECK(braid_rt_f32_to_f16(65519.0f) == 0x7bff, "f16 below the tie");
  CHECK(braid_rt_f32_to_f16(65520.0f) == 0x7c00, "f16 overflow");
  CHECK(braid_rt_f32_to_f16(0x1p-24f) == 0x0001, "f16 least subnormal");
  CHECK(braid_rt_f32_to_f16(0x1p-25f) == 0x0000, "f16 tie to zero");
  CHECK(braid_rt_f32_to_f16(0x3p-25f) == 0x0002, "f16 subnormal tie");
  CHECK(braid_rt_f32_to_f16(-0x1p-14f) == 0x8400, "f16 least normal");
  CHECK(braid_rt_f16_to_f32(0x0001) == 0x1p-24f, "f16 subnormal back");
}

/* Input element i of world rank r: signed, spread over 2^-6..2^6. */
static float input(int r, size_t i) {
  uint64_t bits = braid_rt_splitmix64(
      0x5eedull ^ braid_rt_splitmix64(((uint64_t)r << 40) + i));
  double m = (double)(bits % 1000003) / 1000003.0 * 2.0 - 1.0;
  return (float)ldexp(m, (int)((bits >> 32) % 13) - 6);
}

static void check_reductions(const format_t *f, braid_rt_stream_t *stream) {
  braid_rt_comm_t *world = braid_rt_context_world(test_ctx);
  int size = braid_rt_comm_size(world), rank = braid_rt_comm_rank(world);
  const size_t count = 1003;
  float *buf = malloc(count * sizeof(float));
  float *first = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i)
    buf[i] = input(rank, i);
  CHECK_OK(f->all_reduce(world, buf, count, stream));
  double worst = 0;
  int rounded = 0;
  for (size_t i = 0; i < count; ++i) {
    double sum = 0, abs_sum = 0;
    float f32_sum = 0;
    for (int r = 0; r < size; ++r) {
      sum += input(r, i);
      abs_sum += fabs(input(r, i));
      f32_sum += input(r, i);
    }
    double bound = size * (f->u + 0x1p-24) * 1.01 * abs_sum;
    double err = fabs(buf[i] - sum);
    CHECK(err <= bound,
          "%s all_reduce on %d ranks: element %zu is %.9g, the sum %.9g: "
          "error %.3g above the bound %.3g",
          f->name, size, i, (double)buf[i], sum, err, bound);
    if (err / bound > worst)
      worst = err / bound;
    CHECK(f->widen(f->narrow(buf[i])) == buf[i],
          "%s all_reduce: element %zu (%.9g) is not a %s value", f->name, i,
          (double)buf[i], f->name);
    rounded += buf[i] != f32_sum;
    if (size == 2) {
      size_t half = (count + 1) / 2; /* chunk 0 is the longer */
      int owner = i < half ? 0 : 1;
      float expect = f->widen(f->narrow(
          f->widen(f->narrow(input(1 - owner, i))) + input(owner, i)));
      CHECK(buf[i] == expect,
            "%s all_reduce on 2 ranks: element %zu is %.9g, expected %.9g",
            f->name, i, (double)buf[i], (double)expect);
    }
  }
  CHECK(rounded > 0, "%s all_reduce: no element differs from the f32 sum",
        f->name);
  /* Every rank has rank 0's bits. */
  memcpy(first, buf, count * sizeof(float));
  CHECK_OK(braid_rt_broadcast_f32(world, first, count, 0, stream));
  CHECK(memcmp(first, buf, count * sizeof(float)) == 0,
        "%s all_reduce: rank %d's result differs from rank 0's", f->name, rank);

  /* reduce_scatter: `block` elements per rank. */
  const size_t block = 301;
  float *send = malloc(size * block * sizeof(float));
  float *recv = malloc(block * sizeof(float));
  for (size_t i = 0; i < size * block; ++i)
    send[i] = input(rank, i);
  CHECK_OK(f->reduce_scatter(world, send, recv, block, stream));
  for (size_t j = 0; j < block; ++j) {
    size_t i = rank * block + j;
    double sum = 0, abs_sum = 0;
    for (int r = 0; r < size; ++r) {
      sum += input(r, i);
      abs_sum += fabs(input(r, i));
    }
    double bound = size * (f->u + 0x1p-24) * 1.01 * abs_sum;
    double err = fabs(recv[j] - sum);
    CHECK(err <= bound,
          "%s reduce_scatter on %d ranks: element %zu is %.9g, the sum %.9g: "
          "error %.3g above the bound %.3g",
          f->name, size, i, (double)recv[j], sum, err, bound);
    if (size == 2) {
      float expect = f->widen(f->narrow(input(1 - rank, i))) + input(rank, i);
      CHECK(recv[j] == expect,
            "%s reduce_scatter on 2 ranks: element %zu is %.9g, expected "
            "%.9g",
            f->name, i, (double)recv[j], (double)expect);
    }
  }
  if (rank == 0)
    printf("%s on %d ranks: worst all_reduce error %.3f of the bound\n",
           f->name, size, worst);
  free(buf);
  free(first);
  free(send);
  free(recv);
}

int main(int argc, char **argv) {
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  braid_rt_stream_t *stream = NULL; /* the default stream */
  int rank = braid_rt_context_rank(test_ctx);
  const format_t formats[] = {
      {"bf16", braid_rt_f32_to_bf16, braid_rt_bf16_to_f32, 0x1p-8,
       braid_rt_all_reduce_sum_f32_as_bf16,
       braid_rt_reduce_scatter_sum_f32_as_bf16},
      {"f16", braid_rt_f32_to_f16, braid_rt_f16_to_f32, 0x1p-11,
       braid_rt_all_reduce_sum_f32_as_f16,
       braid_rt_reduce_scatter_sum_f32_as_f16},
  };
  check_ties();
  for (int k = 0; k < 2; ++k) {
    check_conversions(&formats[k]);
    check_reductions(&formats[k], stream);
  }
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  if (rank == 0)
    printf("compressed_test: ok\n");
  return 0;
}
