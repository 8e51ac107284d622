//===- Schedule.cpp - Pipeline schedules as data --------------------------===//

#include "braid/Schedule/Schedule.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>

using namespace mlir::braid::sched;

int Schedule::getStage(int rank, int chunk) const {
  if (placement == Placement::VShape)
    return chunk == 0 ? rank : 2 * numRanks - 1 - rank;
  return chunk * numRanks + rank;
}

std::pair<int, int> Schedule::getRankAndChunk(int stage) const {
  if (placement == Placement::VShape) {
    if (stage < numRanks)
      return {stage, 0};
    return {2 * numRanks - 1 - stage, 1};
  }
  return {stage % numRanks, stage / numRanks};
}

bool Schedule::hasCommunication() const {
  for (const std::vector<Action> &actions : ranks)
    for (const Action &action : actions)
      if (action.isCommunication())
        return true;
  return false;
}

Schedule Schedule::withoutCommunication() const {
  Schedule result = *this;
  for (std::vector<Action> &actions : result.ranks)
    llvm::erase_if(actions,
                   [](const Action &a) { return a.isCommunication(); });
  return result;
}

llvm::StringRef mlir::braid::sched::getActionKindName(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "F";
  case ActionKind::Backward:
    return "B";
  case ActionKind::Weight:
    return "W";
  case ActionKind::FullBackward:
    return "BW";
  case ActionKind::Send:
    return "send";
  case ActionKind::Recv:
    return "recv";
  }
  llvm_unreachable("unknown action kind");
}

llvm::StringRef mlir::braid::sched::getPayloadName(Payload payload) {
  return payload == Payload::Activation ? "activation" : "gradient";
}

std::string mlir::braid::sched::formatAction(const Action &action) {
  if (action.kind == ActionKind::Send)
    return llvm::formatv("send {0} {1}.{2} to rank {3}",
                         getPayloadName(action.payload), action.microbatch,
                         action.chunk, action.peer);
  if (action.kind == ActionKind::Recv)
    return llvm::formatv("recv {0} {1}.{2} from rank {3}",
                         getPayloadName(action.payload), action.microbatch,
                         action.chunk, action.peer);
  return llvm::formatv("{0}{1}.{2}", getActionKindName(action.kind),
                       action.microbatch, action.chunk);
}

std::optional<Action> mlir::braid::sched::parseAction(llvm::StringRef text) {
  // "<microbatch>.<chunk>", both non-negative.
  auto parseMbChunk = [](llvm::StringRef s, Action &action) {
    auto [mb, chunk] = s.split('.');
    return !mb.getAsInteger(10, action.microbatch) &&
           !chunk.getAsInteger(10, action.chunk) && action.microbatch >= 0 &&
           action.chunk >= 0;
  };
  Action action;
  llvm::SmallVector<llvm::StringRef> words;
  text.split(words, ' ');
  if (words.size() == 6 && (words[0] == "send" || words[0] == "recv")) {
    bool send = words[0] == "send";
    action.kind = send ? ActionKind::Send : ActionKind::Recv;
    if (words[1] != "activation" && words[1] != "gradient")
      return std::nullopt;
    action.payload =
        words[1] == "activation" ? Payload::Activation : Payload::Gradient;
    if (!parseMbChunk(words[2], action) || words[3] != (send ? "to" : "from") ||
        words[4] != "rank" || words[5].getAsInteger(10, action.peer) ||
        action.peer < 0)
      return std::nullopt;
    return action;
  }
  llvm::StringRef kind = text.take_while([](char c) { return isalpha(c); });
  if (kind == "F")
    action.kind = ActionKind::Forward;
  else if (kind == "B")
    action.kind = ActionKind::Backward;
  else if (kind == "W")
    action.kind = ActionKind::Weight;
  else if (kind == "BW")
    action.kind = ActionKind::FullBackward;
  else
    return std::nullopt;
  if (!parseMbChunk(text.drop_front(kind.size()), action))
    return std::nullopt;
  return action;
}

std::string mlir::braid::sched::formatNumber(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
  return buffer;
}

void mlir::braid::sched::printSchedule(llvm::raw_ostream &os,
                                       const Schedule &schedule) {
  for (int r = 0; r < schedule.numRanks; ++r) {
    os << "rank " << r << ":";
    for (const Action &action : schedule.ranks[r]) {
      os << ' ';
      if (action.isCompute()) {
        os << getActionKindName(action.kind) << action.microbatch;
        if (schedule.numChunks > 1)
          os << '.' << action.chunk;
        continue;
      }
      // Compact: ">a3" sends activation 3, "<g3" receives gradient 3.
      os << (action.kind == ActionKind::Send ? '>' : '<')
         << (action.payload == Payload::Activation ? 'a' : 'g')
         << action.microbatch;
      if (schedule.numChunks > 1)
        os << '.' << action.chunk;
      os << '@' << action.peer;
    }
    os << '\n';
  }
}
