//===- FormatTest.cpp - Actions as text, both ways ------------------------===//

#include "braid/Schedule/Generators.h"

#include "gtest/gtest.h"

using namespace mlir::braid::sched;

namespace {

// Tests that parseAction reads back every action formatAction writes, for
// every action of a ZB-V and an interleaved schedule with communication.
TEST(FormatTest, ParseInvertsFormat) {
  for (ScheduleKind kind : {ScheduleKind::ZBV, ScheduleKind::Interleaved1F1B}) {
    ScheduleRequest request;
    request.kind = kind;
    request.numRanks = 4;
    request.numMicrobatches = 8;
    request.numChunks = 2;
    llvm::Expected<Schedule> schedule = generateSchedule(request);
    ASSERT_TRUE(static_cast<bool>(schedule))
        << llvm::toString(schedule.takeError());
    int count = 0;
    for (const std::vector<Action> &actions : schedule->ranks)
      for (const Action &action : actions) {
        std::optional<Action> parsed = parseAction(formatAction(action));
        ASSERT_TRUE(parsed.has_value()) << formatAction(action);
        EXPECT_EQ(*parsed, action) << formatAction(action);
        ++count;
      }
    EXPECT_GT(count, 4 * 8 * 2 * 3); // computes and transfers of every rank
  }
}

// Tests that malformed actions are refused.
TEST(FormatTest, RefusesMalformedText) {
  for (const char *text :
       {"", "F", "F3", "F3.", "F.1", "X3.1", "F-1.0", "F3.1x", "BWW3.1",
        "send activation 3.0 to rank", "send activation 3.0 from rank 1",
        "recv gradient 3.0 to rank 1", "send weights 3.0 to rank 1",
        "recv gradient 3.0 from rank -1", "send activation 3 to rank 1"})
    EXPECT_FALSE(parseAction(text).has_value()) << "'" << text << "'";
  EXPECT_EQ(parseAction("BW12.3"), Action::fullBackward(12, 3));
  EXPECT_EQ(parseAction("recv gradient 2.0 from rank 1"),
            Action::recv(Payload::Gradient, 2, 0, 1));
}

} // namespace
