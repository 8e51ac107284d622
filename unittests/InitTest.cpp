//===- InitTest.cpp - Deterministic parameter initialisation ---------------===//

#include "braid/rt/init.h"

#include "gtest/gtest.h"

#include <cmath>
#include <vector>

namespace {

std::vector<double> fill(braid_rt_init_kind_t kind, double a, double b,
                         uint64_t key, uint64_t first, size_t count) {
  std::vector<double> v(count);
  braid_rt_init_fill_f64(kind, a, b, key, first, count, v.data());
  return v;
}

TEST(InitTest, KnownHashValues) {
  // FNV-1a 64 reference values (from the algorithm's published test suite).
  EXPECT_EQ(braid_rt_fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(braid_rt_fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(braid_rt_fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  // SplitMix64 of 0 (first output of a generator seeded with 0).
  EXPECT_EQ(braid_rt_splitmix64(0), 0xe220a8397b1dcdafull);
}

TEST(InitTest, AnySubRangeEqualsTheWhole) {
  uint64_t key = braid_rt_init_key(42, "h.3.mlp.fc.weight");
  std::vector<double> whole = fill(BRAID_RT_INIT_NORMAL, 0.02, 0, key, 0, 1000);
  std::vector<double> part = fill(BRAID_RT_INIT_NORMAL, 0.02, 0, key, 500, 250);
  for (size_t i = 0; i < part.size(); ++i)
    EXPECT_EQ(part[i], whole[500 + i]);
}

TEST(InitTest, StreamsDependOnSeedAndName) {
  uint64_t a = braid_rt_init_key(1, "w");
  EXPECT_EQ(a, braid_rt_init_key(1, "w"));
  EXPECT_NE(a, braid_rt_init_key(2, "w"));
  EXPECT_NE(a, braid_rt_init_key(1, "v"));
}

TEST(InitTest, NormalHasTheRequestedMoments) {
  const size_t n = 200000;
  std::vector<double> v =
      fill(BRAID_RT_INIT_NORMAL, 0.5, 0, braid_rt_init_key(7, "x"), 0, n);
  double mean = 0, var = 0;
  for (double x : v)
    mean += x;
  mean /= n;
  for (double x : v)
    var += (x - mean) * (x - mean);
  var /= n;
  // Standard errors: 0.5/sqrt(n) ~ 1.1e-3 for the mean; ~0.3% for the
  // variance. Five of them.
  EXPECT_NEAR(mean, 0.0, 5.6e-3);
  EXPECT_NEAR(std::sqrt(var), 0.5, 0.5 * 0.008);
}

TEST(InitTest, UniformStaysInItsInterval) {
  const size_t n = 100000;
  std::vector<double> v =
      fill(BRAID_RT_INIT_UNIFORM, -2, 3, braid_rt_init_key(7, "u"), 0, n);
  double mean = 0;
  for (double x : v) {
    EXPECT_GE(x, -2.0);
    EXPECT_LT(x, 3.0);
    mean += x;
  }
  // Mean 0.5, standard error 5/sqrt(12 n) ~ 4.6e-3.
  EXPECT_NEAR(mean / n, 0.5, 0.023);
}

TEST(InitTest, ConstantKinds) {
  EXPECT_EQ(fill(BRAID_RT_INIT_ZEROS, 0, 0, 1, 0, 3),
            (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(fill(BRAID_RT_INIT_ONES, 0, 0, 1, 0, 2),
            (std::vector<double>{1, 1}));
  EXPECT_EQ(fill(BRAID_RT_INIT_CONSTANT, 0.25, 0, 1, 0, 2),
            (std::vector<double>{0.25, 0.25}));
}

} // namespace
