//===- HardwareTest.cpp - Hardware files and collective times -------------===//

#include "braid/Planner/Hardware.h"
#include "braid/Planner/Calibration.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace mlir::braid::plan;

namespace {

constexpr const char *kValid = R"json({
  "name": "toy",
  "peak_flops": {"bf16": 1e14, "f32": 1e13},
  "efficiency": {"matmul": 0.5, "attention": 0.25, "memory": 0.75},
  "memory_bandwidth": 1e12,
  "device_memory": 8e10,
  "devices_per_node": 8,
  "links": {
    "intra_node": {
      "all_reduce": {"alpha": 1e-6, "beta": 2e11},
      "all_gather": {"alpha": 1e-6, "beta": 2e11},
      "reduce_scatter": {"alpha": 1e-6, "beta": 2e11},
      "send_recv": {"alpha": 5e-6, "beta": 2e11}},
    "inter_node": {
      "all_reduce": {"alpha": 5e-6, "beta": 2e10},
      "all_gather": {"alpha": 5e-6, "beta": 2e10},
      "reduce_scatter": {"alpha": 5e-6, "beta": 2e10},
      "send_recv": {"alpha": 1e-5, "beta": 2e10}}}
})json";

/// `hw` written by writeHardware and parsed again.
llvm::Expected<Hardware> roundTrip(const Hardware &hw) {
  std::string text;
  llvm::raw_string_ostream os(text);
  writeHardware(os, hw);
  return parseHardware(text, "again.json");
}

std::string errorOf(llvm::StringRef json) {
  llvm::Expected<Hardware> hw = parseHardware(json, "hw.json");
  if (hw)
    return "";
  return llvm::toString(hw.takeError());
}

std::string replace(std::string s, llvm::StringRef from, llvm::StringRef to) {
  size_t at = s.find(from.str());
  EXPECT_NE(at, std::string::npos) << from.str();
  return s.replace(at, from.size(), to.str());
}

TEST(HardwareTest, ParsesAndRoundTrips) {
  llvm::Expected<Hardware> hw = parseHardware(kValid, "hw.json");
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  EXPECT_EQ(hw->name, "toy");
  EXPECT_EQ(*hw->getPeakFlops("bf16"), 1e14);
  EXPECT_EQ(hw->getEfficiency(OpClass::Attention), 0.25);
  EXPECT_EQ(hw->devicesPerNode, 8);
  EXPECT_EQ(hw->interNode.get(CollectiveKind::SendRecv).alpha, 1e-5);
  llvm::Expected<Hardware> again = roundTrip(*hw);
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(again->peakFlops, hw->peakFlops);
  EXPECT_EQ(again->intraNode.get(CollectiveKind::AllGather).beta, 2e11);
  EXPECT_EQ(again->deviceMemory, 8e10);
  EXPECT_EQ(again->concurrentDevicesPerNode, 0);
  // Ranks sharing cores: 4 of the 8 compute at once; round trip; located
  // errors.
  std::string shared = replace(kValid, "\"devices_per_node\": 8",
                               "\"devices_per_node\": 8, "
                               "\"concurrent_devices_per_node\": 4");
  llvm::Expected<Hardware> s = parseHardware(shared, "shared.json");
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_EQ(s->concurrentDevicesPerNode, 4);
  std::string sharedText;
  llvm::raw_string_ostream sos(sharedText);
  writeHardware(sos, *s);
  llvm::Expected<Hardware> s2 = parseHardware(sharedText, "again.json");
  ASSERT_TRUE(bool(s2)) << llvm::toString(s2.takeError());
  EXPECT_EQ(s2->concurrentDevicesPerNode, 4);
  EXPECT_EQ(errorOf(replace(shared, "\"concurrent_devices_per_node\": 4",
                            "\"concurrent_devices_per_node\": 2.5")),
            "hw.json: hardware.concurrent_devices_per_node: expected an "
            "integer");
}

TEST(HardwareTest, LocatedErrors) {
  EXPECT_EQ(errorOf(replace(kValid, "\"matmul\": 0.5", "\"matmul\": 1.5")),
            "hw.json: hardware.efficiency.matmul: expected a number in (0, "
            "1], got 1.5");
  EXPECT_EQ(errorOf(replace(kValid, "\"name\": \"toy\",", "")),
            "hw.json: hardware.name: missing");
  EXPECT_EQ(errorOf(replace(kValid, "\"memory_bandwidth\"", "\"memory_bw\"")),
            "hw.json: hardware.memory_bw: unknown key (expected one of: name, "
            "description, source, peak_flops, efficiency, memory_bandwidth, "
            "device_memory, workspace_bytes, devices_per_node, "
            "concurrent_devices_per_node, kernel_overhead, descheduled_wait, "
            "saved_activation_copies, attention_bandwidth, "
            "attention_backward_bandwidth, links)");
  EXPECT_EQ(errorOf(replace(kValid, "\"beta\": 2e10}}}", "\"beta\": 0}}}")),
            "hw.json: hardware.links.inter_node.send_recv.beta: expected a "
            "number in (0, 1e+30], got 0");
  EXPECT_EQ(errorOf(replace(kValid, "\"devices_per_node\": 8",
                            "\"devices_per_node\": 2.5")),
            "hw.json: hardware.devices_per_node: expected an integer");
  EXPECT_NE(errorOf("{\"name\": ").find("hw.json: not valid JSON"),
            std::string::npos);
  llvm::Expected<Hardware> hw = parseHardware(kValid, "hw.json");
  ASSERT_TRUE(bool(hw));
  llvm::Expected<double> f64 = hw->getPeakFlops("f64");
  ASSERT_FALSE(bool(f64));
  EXPECT_EQ(llvm::toString(f64.takeError()),
            "hardware 'toy' has no peak FLOP/s for element type 'f64' (it "
            "has: bf16, f32)");
}

// The figures added for this CPU machine: row-wise ops' efficiency (the
// memory efficiency where a file does not give it, as such files costed
// them), a fixed cost per kernel and the wait of collectives for
// descheduled peers (0 where not given); round trip; located errors.
TEST(HardwareTest, RowWiseKernelOverheadAndDescheduledWait) {
  llvm::Expected<Hardware> old = parseHardware(kValid, "hw.json");
  ASSERT_TRUE(bool(old)) << llvm::toString(old.takeError());
  EXPECT_EQ(old->getEfficiency(OpClass::RowWise), 0.75);
  EXPECT_EQ(old->getEfficiency(OpClass::Loss), 0.75);
  EXPECT_EQ(old->getEfficiency(OpClass::Optimizer), 0.75);
  EXPECT_EQ(old->getEfficiency(OpClass::Transcendental), 0.75);
  EXPECT_EQ(old->kernelOverhead, 0);
  EXPECT_EQ(old->descheduledWait, 0);
  std::string text = replace(kValid, "\"memory\": 0.75",
                             "\"memory\": 0.75, \"rowwise\": 0.125, "
                             "\"loss\": 0.0625, \"optimizer\": 0.375, "
                             "\"transcendental\": 0.25");
  text = replace(text, "\"devices_per_node\": 8",
                 "\"devices_per_node\": 8, \"kernel_overhead\": 2e-6, "
                 "\"descheduled_wait\": 0.003, "
                 "\"saved_activation_copies\": 2");
  llvm::Expected<Hardware> hw = parseHardware(text, "hw.json");
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  EXPECT_EQ(hw->getEfficiency(OpClass::RowWise), 0.125);
  EXPECT_EQ(hw->getEfficiency(OpClass::Memory), 0.75);
  EXPECT_EQ(hw->kernelOverhead, 2e-6);
  EXPECT_EQ(hw->descheduledWait, 0.003);
  llvm::Expected<Hardware> again = roundTrip(*hw);
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(again->getEfficiency(OpClass::RowWise), 0.125);
  EXPECT_EQ(again->getEfficiency(OpClass::Loss), 0.0625);
  EXPECT_EQ(again->getEfficiency(OpClass::Optimizer), 0.375);
  EXPECT_EQ(again->getEfficiency(OpClass::Transcendental), 0.25);
  EXPECT_EQ(again->kernelOverhead, 2e-6);
  EXPECT_EQ(again->descheduledWait, 0.003);
  EXPECT_EQ(again->savedActivationCopies, 2);
  EXPECT_EQ(old->savedActivationCopies, 0);
  EXPECT_EQ(errorOf(replace(text, "\"rowwise\": 0.125", "\"rowwise\": 0")),
            "hw.json: hardware.efficiency.rowwise: expected a number in (0, "
            "1], got 0");
  EXPECT_EQ(errorOf(replace(text, "\"optimizer\": 0.375", "\"optimizer\": 2")),
            "hw.json: hardware.efficiency.optimizer: expected a number in (0, "
            "1], got 2");
  EXPECT_EQ(errorOf(replace(text, "\"kernel_overhead\": 2e-6",
                            "\"kernel_overhead\": -1")),
            "hw.json: hardware.kernel_overhead: expected a number in [0, 1], "
            "got -1");
  EXPECT_EQ(errorOf(replace(text, "\"descheduled_wait\": 0.003",
                            "\"descheduled_wait\": \"3ms\"")),
            "hw.json: hardware.descheduled_wait: expected a number");
  // Whether a plan's devices share cores: more on a node than compute at
  // once.
  hw->concurrentDevicesPerNode = 4;
  EXPECT_FALSE(hw->sharesCores(4));
  EXPECT_TRUE(hw->sharesCores(5));
  EXPECT_TRUE(hw->sharesCores(64));
  hw->concurrentDevicesPerNode = 0;
  EXPECT_FALSE(hw->sharesCores(64));
}

TEST(HardwareTest, AttentionBackwardAndStreaming) {
  // A file from before the attention's gradients had their own class: the
  // attention's efficiency, and no streaming term.
  llvm::Expected<Hardware> old = parseHardware(kValid, "hw.json");
  ASSERT_TRUE(bool(old)) << llvm::toString(old.takeError());
  EXPECT_EQ(old->getEfficiency(OpClass::AttentionBackward), 0.25);
  EXPECT_EQ(old->attentionBandwidth, 0);
  EXPECT_EQ(old->attentionBackwardBandwidth, 0);
  std::string text = replace(kValid, "\"attention\": 0.25",
                             "\"attention\": 0.25, \"attention_backward\": "
                             "0.125");
  text = replace(text, "\"devices_per_node\": 8",
                 "\"devices_per_node\": 8, \"attention_bandwidth\": 6e9, "
                 "\"attention_backward_bandwidth\": 5e9");
  llvm::Expected<Hardware> hw = parseHardware(text, "hw.json");
  ASSERT_TRUE(bool(hw)) << llvm::toString(hw.takeError());
  EXPECT_EQ(hw->getEfficiency(OpClass::Attention), 0.25);
  EXPECT_EQ(hw->getEfficiency(OpClass::AttentionBackward), 0.125);
  EXPECT_EQ(hw->attentionBandwidth, 6e9);
  EXPECT_EQ(hw->attentionBackwardBandwidth, 5e9);
  llvm::Expected<Hardware> again = roundTrip(*hw);
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(again->getEfficiency(OpClass::AttentionBackward), 0.125);
  EXPECT_EQ(again->attentionBandwidth, 6e9);
  EXPECT_EQ(again->attentionBackwardBandwidth, 5e9);
  EXPECT_NE(errorOf(replace(text, "\"attention_bandwidth\": 6e9",
                            "\"attention_bandwidth\": 0"))
                .find("hw.json: hardware.attention_bandwidth: expected a "
                      "number in (0, "),
            std::string::npos);
  EXPECT_EQ(errorOf(replace(text, "\"attention_backward\": 0.125",
                            "\"attention_backward\": 1.5")),
            "hw.json: hardware.efficiency.attention_backward: expected a "
            "number in (0, 1], got 1.5");
}

TEST(HardwareTest, UnknownName) {
  llvm::Expected<Hardware> hw = loadHardware("no-such-device");
  ASSERT_FALSE(bool(hw));
  EXPECT_NE(llvm::toString(hw.takeError())
                .find("unknown hardware "
                      "'no-such-device'"),
            std::string::npos);
}

TEST(HardwareTest, RingTimes) {
  LinkCost c{2e-6, 1e9};
  // all_reduce on 4: 2(n-1) steps, 2(n-1)/n of the bytes.
  EXPECT_DOUBLE_EQ(getCollectiveTime(c, CollectiveKind::AllReduce, 1e9, 4),
                   6 * 2e-6 + 1.5);
  EXPECT_DOUBLE_EQ(getCollectiveTime(c, CollectiveKind::AllGather, 1e9, 4),
                   3 * 2e-6 + 0.75);
  EXPECT_DOUBLE_EQ(getCollectiveTime(c, CollectiveKind::SendRecv, 1e9, 2),
                   2e-6 + 1.0);
  EXPECT_EQ(getCollectiveTime(c, CollectiveKind::AllReduce, 1e9, 1), 0);
}

TEST(HardwareTest, FitRecoversAlphaBeta) {
  std::vector<TimingSample> samples;
  for (double bytes : {1e3, 1e5, 1e7})
    samples.push_back(
        {bytes,
         getCollectiveTime({3e-6, 5e9}, CollectiveKind::AllReduce, bytes, 4)});
  llvm::Expected<LinkCost> fit =
      fitLinkCost(CollectiveKind::AllReduce, 4, samples);
  ASSERT_TRUE(bool(fit)) << llvm::toString(fit.takeError());
  EXPECT_NEAR(fit->alpha, 3e-6, 1e-12);
  EXPECT_NEAR(fit->beta, 5e9, 1e-3);
  // Small sizes slowed by a busy machine (time falling with size up to
  // 1e5 bytes): bounded by the larger sizes' times, the fit still sees time
  // growing with size; plain least squares would give a negative slope.
  llvm::Expected<LinkCost> noisy =
      fitLinkCost(CollectiveKind::AllReduce, 4,
                  {{1e3, 200e-6}, {1e4, 100e-6}, {1e5, 50e-6}, {1e6, 60e-6}});
  ASSERT_TRUE(bool(noisy)) << llvm::toString(noisy.takeError());
  EXPECT_GT(noisy->beta, 0);
  llvm::Expected<LinkCost> flat =
      fitLinkCost(CollectiveKind::SendRecv, 2, {{1e3, 1e-3}, {1e6, 1e-3}});
  ASSERT_FALSE(bool(flat));
  EXPECT_NE(llvm::toString(flat.takeError()).find("does not grow with size"),
            std::string::npos);
}

// The calibration's threads per rank and placement are braid-run's: the
// default is cores / ranks (at least 1), not the calling shell's threads.
TEST(HardwareTest, CalibrationPlacementAsBraidRun) {
  auto choose = [](int ranks, int cores, int flag,
                   std::optional<std::string> env) {
    llvm::Expected<RankPlacement> p =
        chooseRankPlacement(ranks, cores, flag, env);
    EXPECT_TRUE(bool(p)) << llvm::toString(p.takeError());
    return *p;
  };
  RankPlacement two = choose(2, 2, 0, std::nullopt);
  EXPECT_EQ(two.threads, 1);
  EXPECT_EQ(two.threadsFrom, "cores / ranks");
  EXPECT_TRUE(two.bound);
  EXPECT_EQ(two.describe(), "2 ranks x 1 thread on 2 cores, each bound to 1 "
                            "core (threads from cores / ranks)");
  EXPECT_EQ(llvm::join(two.getMpirunArgs(), " "),
            "-x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 "
            "--use-hwthread-cpus --map-by slot:PE=1 --bind-to hwthread");
  EXPECT_EQ(choose(2, 8, 0, std::nullopt).threads, 4);
  EXPECT_EQ(choose(3, 8, 0, std::nullopt).threads, 2);

  // More ranks than cores: 1 thread each, not bound, waiting ranks yield.
  RankPlacement eight = choose(8, 2, 0, std::nullopt);
  EXPECT_EQ(eight.threads, 1);
  EXPECT_FALSE(eight.bound);
  EXPECT_EQ(llvm::join(eight.getMpirunArgs(), " "),
            "-x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 --mca "
            "mpi_yield_when_idle 1 --bind-to none");
  EXPECT_EQ(eight.describe(), "8 ranks x 1 thread on 2 cores "
                              "(oversubscribed), not bound (threads from "
                              "cores / ranks)");

  // $OMP_NUM_THREADS, then --threads over it; more threads than fit: not
  // bound.
  RankPlacement env = choose(2, 2, 0, std::string("2"));
  EXPECT_EQ(env.threads, 2);
  EXPECT_EQ(env.threadsFrom, "$OMP_NUM_THREADS");
  EXPECT_FALSE(env.bound);
  RankPlacement flag = choose(2, 2, 1, std::string("2"));
  EXPECT_EQ(flag.threads, 1);
  EXPECT_EQ(flag.threadsFrom, "--threads");
  llvm::Expected<RankPlacement> bad =
      chooseRankPlacement(2, 2, 0, std::string("zero"));
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("got 'zero'"),
            std::string::npos);
}

} // namespace
