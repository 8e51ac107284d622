//===- VerifierTest.cpp - The verifier rejects broken schedules -----------===//

#include "braid/Schedule/Verifier.h"
#include "braid/Schedule/Generators.h"

#include "gtest/gtest.h"

#include <string>

using namespace mlir::braid::sched;

namespace {

const Payload kAct = Payload::Activation;
const Payload kGrad = Payload::Gradient;

/// Two ranks, two micro-batches, 1F1B with explicit communication:
///   rank 0: F0 >a0 F1 >a1 <g0 BW0 <g1 BW1
///   rank 1: <a0 F0 BW0 <a1 >g0 F1 BW1 >g1
/// Rank 1 receives activation 1 before sending gradient 0, the order in
/// which rank 0 does the opposite operations, so blocking P2P completes.
Schedule makeValid() {
  Schedule s("hand", 2, 2);
  s.ranks[0] = {Action::forward(0),           Action::send(kAct, 0, 0, 1),
                Action::forward(1),           Action::send(kAct, 1, 0, 1),
                Action::recv(kGrad, 0, 0, 1), Action::fullBackward(0),
                Action::recv(kGrad, 1, 0, 1), Action::fullBackward(1)};
  s.ranks[1] = {Action::recv(kAct, 0, 0, 0),  Action::forward(0),
                Action::fullBackward(0),      Action::recv(kAct, 1, 0, 0),
                Action::send(kGrad, 0, 0, 0), Action::forward(1),
                Action::fullBackward(1),      Action::send(kGrad, 1, 0, 0)};
  return s;
}

std::string verifyMessage(const Schedule &s, VerifyOptions options = {}) {
  llvm::Error err = verifySchedule(s, options);
  return err ? llvm::toString(std::move(err)) : std::string();
}

// Tests that the hand-written schedule is accepted.
TEST(VerifierTest, AcceptsValidSchedule) {
  EXPECT_EQ(verifyMessage(makeValid()), "");
}

// Tests that a send whose receive is missing is named.
TEST(VerifierTest, RejectsMissingRecv) {
  Schedule s = makeValid();
  s.ranks[1].erase(s.ranks[1].begin() + 3); // <a1 on rank 1.
  EXPECT_EQ(verifyMessage(s), "rank 0 action 3 (send activation 1.0 to rank "
                              "1): rank 1 has no matching recv");
}

// Tests a send order that deadlocks under blocking point-to-point: rank 1
// sends gradient 0 before receiving activation 1 while rank 0 sends
// activation 1 before receiving gradient 0. Each send waits for a receive
// the other rank only reaches after its own send. (Buffered sends would get
// through; the verifier assumes the strictest semantics.)
TEST(VerifierTest, RejectsDeadlockingSendOrder) {
  Schedule s = makeValid();
  std::swap(s.ranks[1][3], s.ranks[1][4]); // >g0 before <a1.
  EXPECT_EQ(verifyMessage(s),
            "rank 0 action 3 (send activation 1.0 to rank 1): deadlock: waits "
            "for rank 1, blocked at action 3 (send gradient 0.0 to rank 0)");
}

// Tests the mirror image: both ranks receive first.
TEST(VerifierTest, RejectsDeadlockingRecvOrder) {
  Schedule s = makeValid();
  std::swap(s.ranks[0][3], s.ranks[0][4]); // <g0 before >a1.
  EXPECT_EQ(verifyMessage(s),
            "rank 0 action 3 (recv gradient 0.0 from rank 1): deadlock: waits "
            "for rank 1, blocked at action 3 (recv activation 1.0 from rank "
            "0)");
}

// Tests that a backward before its forward is rejected.
TEST(VerifierTest, RejectsBackwardBeforeForward) {
  Schedule s("hand", 1, 2);
  s.ranks[0] = {Action::forward(0),  Action::backward(1), Action::forward(1),
                Action::backward(0), Action::weight(0),   Action::weight(1)};
  EXPECT_EQ(verifyMessage(s), "rank 0 action 1 (B1.0): backward before its F");
}

// Tests that memory above the limit is rejected, at the first F that
// crosses it.
TEST(VerifierTest, RejectsMemoryOverLimit) {
  Schedule s = buildGPipe(2, 4);
  ASSERT_FALSE(static_cast<bool>(insertCommunication(s)));
  VerifyOptions options;
  options.memoryLimit = 3;
  EXPECT_EQ(verifyMessage(s), "");
  EXPECT_EQ(verifyMessage(s, options),
            "rank 0 action 6 (F3.0): activation memory reaches 4 "
            "micro-batches, above the limit of 3");
  options.memoryLimit = 4;
  EXPECT_EQ(verifyMessage(s, options), "");
}

// Tests the memory model: with the paper's accounting B frees part of the
// activation (here half), so deferring W fits a limit that the strict
// accounting rejects.
TEST(VerifierTest, MemoryModelWeightFraction) {
  Schedule s("hand", 1, 2);
  s.ranks[0] = {Action::forward(0),  Action::backward(0), Action::forward(1),
                Action::backward(1), Action::weight(0),   Action::weight(1)};
  VerifyOptions options;
  options.memoryLimit = 1.5;
  EXPECT_EQ(verifyMessage(s, options),
            "rank 0 action 2 (F1.0): activation memory reaches 2 "
            "micro-batches, above the limit of 1.5");
  options.memory.weightFraction = 0.5;
  EXPECT_EQ(verifyMessage(s, options), "");
}

// Tests W before B, duplicates, missing passes and wrong routes.
TEST(VerifierTest, RejectsStructuralErrors) {
  Schedule s("hand", 1, 1);
  s.ranks[0] = {Action::forward(0), Action::weight(0), Action::backward(0)};
  EXPECT_EQ(verifyMessage(s), "rank 0 action 1 (W0.0): W before its B");

  s.ranks[0] = {Action::forward(0), Action::forward(0),
                Action::fullBackward(0)};
  EXPECT_EQ(verifyMessage(s), "rank 0 action 1 (F0.0): appears twice");

  s.ranks[0] = {Action::forward(0), Action::backward(0)};
  EXPECT_EQ(verifyMessage(s),
            "rank 0: micro-batch 0 chunk 0 (stage 0) has a B but no W");

  s.ranks[0] = {Action::forward(0), Action::fullBackward(0),
                Action::forward(1)};
  EXPECT_EQ(verifyMessage(s), "rank 0 action 2 (F1.0): micro-batch out of "
                              "range [0, 1)");

  Schedule t = makeValid();
  t.ranks[0][1].peer = 0;
  EXPECT_EQ(verifyMessage(t), "rank 0 action 1 (send activation 0.0 to rank "
                              "0): peer must be another rank in [0, 2)");

  Schedule three("hand", 3, 1);
  three.ranks[0] = {Action::forward(0), Action::send(kAct, 0, 0, 2),
                    Action::recv(kGrad, 0, 0, 1), Action::fullBackward(0)};
  EXPECT_EQ(verifyMessage(three),
            "rank 0 action 1 (send activation 0.0 to rank 2): stage 0's "
            "neighbour, stage 1, is on rank 1, not rank 2");
}

// Tests that out-of-order sends and receives are caught even when every
// send has a receive somewhere.
TEST(VerifierTest, RejectsOutOfOrderMatching) {
  Schedule s = makeValid();
  std::swap(s.ranks[1][0], s.ranks[1][3]); // <a1 first, <a0 later.
  std::string message = verifyMessage(s);
  EXPECT_NE(message.find("out of order"), std::string::npos) << message;
}

// Tests that data used before it is received is rejected.
TEST(VerifierTest, RejectsUseBeforeRecv) {
  Schedule s = makeValid();
  std::swap(s.ranks[1][0], s.ranks[1][1]); // F0 before <a0.
  EXPECT_EQ(verifyMessage(s),
            "rank 1 action 0 (F0.0): uses the activation of micro-batch 0 "
            "from stage 0 before any recv delivers it from rank 0");
}

// Tests that a compute-only schedule is accepted as such only when asked,
// and that its compute order is still checked for deadlock.
TEST(VerifierTest, ImplicitCommunication) {
  Schedule s = build1F1B(3, 5);
  VerifyOptions options;
  EXPECT_EQ(verifyMessage(s, options),
            "rank 0 action 3 (BW0.0): uses the gradient of micro-batch 0 from "
            "stage 1 before any recv delivers it from rank 1");
  options.allowImplicitCommunication = true;
  EXPECT_EQ(verifyMessage(s, options), "");
  // Rank 0 waits for gradient 0 before producing activation 1, which rank 1
  // needs before it can produce gradient 0: a cycle.
  Action backward = s.ranks[0][3];
  s.ranks[0].erase(s.ranks[0].begin() + 3);
  s.ranks[0].insert(s.ranks[0].begin() + 1, backward);
  EXPECT_EQ(verifyMessage(s, options),
            "rank 0 action 1 (BW0.0): deadlock: waits for rank 1, blocked at "
            "action 1 (F1.0)");
}

} // namespace
