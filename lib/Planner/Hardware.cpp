//===- Hardware.cpp - Reading and writing hardware descriptions -----------===//

#include "braid/Planner/Hardware.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <cmath>
#include <cstdio>

using namespace mlir::braid::plan;
using llvm::StringRef;

StringRef mlir::braid::plan::getOpClassName(OpClass c) {
  switch (c) {
  case OpClass::Matmul:
    return "matmul";
  case OpClass::Attention:
    return "attention";
  case OpClass::Memory:
    return "memory";
  case OpClass::RowWise:
    return "rowwise";
  case OpClass::Loss:
    return "loss";
  case OpClass::Optimizer:
    return "optimizer";
  case OpClass::Transcendental:
    return "transcendental";
  case OpClass::AttentionBackward:
    return "attention_backward";
  }
  return "?";
}

StringRef mlir::braid::plan::getCollectiveKindName(CollectiveKind k) {
  switch (k) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::SendRecv:
    return "send_recv";
  }
  return "?";
}

double mlir::braid::plan::getCollectiveTime(const LinkCost &cost,
                                            CollectiveKind kind, double bytes,
                                            int n) {
  if (bytes <= 0)
    return 0;
  if (kind == CollectiveKind::SendRecv)
    return cost.alpha + bytes / cost.beta;
  if (n <= 1)
    return 0;
  double steps = n - 1, share = double(n - 1) / n;
  if (kind == CollectiveKind::AllReduce) {
    steps *= 2;
    share *= 2;
  }
  return steps * cost.alpha + share * bytes / cost.beta;
}

llvm::Expected<double> Hardware::getPeakFlops(StringRef dtype) const {
  auto it = peakFlops.find(dtype.str());
  if (it != peakFlops.end())
    return it->second;
  std::string have;
  for (auto &[k, v] : peakFlops)
    have += (have.empty() ? "" : ", ") + k;
  return llvm::createStringError(
      "hardware '%s' has no peak FLOP/s for element type '%s' (it has: %s)",
      name.c_str(), dtype.str().c_str(), have.c_str());
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

/// `v` as printf's %g writes it ("0", "1.5", "1e+30").
static std::string shortest(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

namespace {
/// Reads fields of one JSON object, remembering where it is for messages.
class Reader {
public:
  Reader(StringRef file) : file(file) {}

  llvm::Error error(const llvm::Twine &path, const llvm::Twine &message) {
    return llvm::createStringError(
        llvm::Twine(file + ": " + path + ": " + message).str());
  }

  /// A required object member.
  llvm::Expected<const llvm::json::Object *>
  object(const llvm::json::Object &parent, StringRef key, StringRef path) {
    const llvm::json::Value *v = parent.get(key);
    if (!v)
      return error(path, "missing");
    if (const llvm::json::Object *o = v->getAsObject())
      return o;
    return error(path, "expected an object");
  }

  /// A required number in (lo, hi] (or [lo, hi] with `closed`).
  llvm::Expected<double> number(const llvm::json::Object &parent, StringRef key,
                                StringRef path, double lo, double hi,
                                bool closed = false) {
    const llvm::json::Value *v = parent.get(key);
    if (!v)
      return error(path, "missing");
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return error(path, "expected a number");
    if (!std::isfinite(*d) || *d > hi || *d < lo || (!closed && *d == lo))
      return error(path, "expected a number in " +
                             llvm::Twine(closed ? "[" : "(") + shortest(lo) +
                             ", " + shortest(hi) + "], got " + shortest(*d));
    return *d;
  }

  llvm::Expected<std::string> string(const llvm::json::Object &parent,
                                     StringRef key, StringRef path,
                                     bool required) {
    const llvm::json::Value *v = parent.get(key);
    if (!v) {
      if (required)
        return error(path, "missing");
      return std::string();
    }
    if (std::optional<StringRef> s = v->getAsString())
      return s->str();
    return error(path, "expected a string");
  }

  /// Fails on members not in `known`: a misspelt key would otherwise be
  /// ignored silently.
  llvm::Error onlyKnown(const llvm::json::Object &o, StringRef path,
                        llvm::ArrayRef<StringRef> known) {
    for (const auto &kv : o) {
      StringRef key = kv.first;
      if (!llvm::is_contained(known, key))
        return error(
            (path + "." + key).str(),
            "unknown key (expected one of: " + llvm::join(known, ", ") + ")");
    }
    return llvm::Error::success();
  }

private:
  std::string file;
};
} // namespace

static constexpr double kHuge = 1e30;

static llvm::Error parseLevel(Reader &r, const llvm::json::Object &links,
                              StringRef key, LinkLevel &level) {
  std::string path = ("hardware.links." + key).str();
  auto o = r.object(links, key, path);
  if (!o)
    return o.takeError();
  level.name = key.str();
  llvm::SmallVector<StringRef> kinds;
  for (int k = 0; k < kNumCollectiveKinds; ++k)
    kinds.push_back(getCollectiveKindName(CollectiveKind(k)));
  if (llvm::Error e = r.onlyKnown(**o, path, kinds))
    return e;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    std::string kpath = path + "." + kinds[k].str();
    auto c = r.object(**o, kinds[k], kpath);
    if (!c)
      return c.takeError();
    if (llvm::Error e = r.onlyKnown(**c, kpath, {"alpha", "beta"}))
      return e;
    auto alpha = r.number(**c, "alpha", kpath + ".alpha", 0, 1, true);
    if (!alpha)
      return alpha.takeError();
    auto beta = r.number(**c, "beta", kpath + ".beta", 0, kHuge);
    if (!beta)
      return beta.takeError();
    level.costs[k] = {*alpha, *beta};
  }
  return llvm::Error::success();
}

llvm::Expected<Hardware> mlir::braid::plan::parseHardware(StringRef json,
                                                          StringRef fileName) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return llvm::createStringError(
        (fileName + ": not valid JSON: " + llvm::toString(value.takeError()))
            .str());
  Reader r(fileName);
  const llvm::json::Object *root = value->getAsObject();
  if (!root)
    return r.error("hardware", "expected an object");
  if (llvm::Error e = r.onlyKnown(
          *root, "hardware",
          {"name", "description", "source", "peak_flops", "efficiency",
           "memory_bandwidth", "device_memory", "workspace_bytes",
           "devices_per_node", "concurrent_devices_per_node", "kernel_overhead",
           "descheduled_wait", "saved_activation_copies", "attention_bandwidth",
           "attention_backward_bandwidth", "links"}))
    return std::move(e);

  Hardware hw;
  auto name = r.string(*root, "name", "hardware.name", true);
  if (!name)
    return name.takeError();
  hw.name = *name;
  auto description =
      r.string(*root, "description", "hardware.description", false);
  if (!description)
    return description.takeError();
  hw.description = *description;
  auto source = r.string(*root, "source", "hardware.source", false);
  if (!source)
    return source.takeError();
  hw.source = *source;

  auto peaks = r.object(*root, "peak_flops", "hardware.peak_flops");
  if (!peaks)
    return peaks.takeError();
  if ((*peaks)->empty())
    return r.error("hardware.peak_flops", "needs at least one element type");
  for (const auto &kv : **peaks) {
    std::string key = kv.first.str();
    auto v = r.number(**peaks, key, "hardware.peak_flops." + key, 0, kHuge);
    if (!v)
      return v.takeError();
    hw.peakFlops[key] = *v;
  }

  auto eff = r.object(*root, "efficiency", "hardware.efficiency");
  if (!eff)
    return eff.takeError();
  llvm::SmallVector<StringRef> classes;
  for (int c = 0; c < kNumOpClasses; ++c)
    classes.push_back(getOpClassName(OpClass(c)));
  if (llvm::Error e = r.onlyKnown(**eff, "hardware.efficiency", classes))
    return std::move(e);
  for (int c = 0; c < kNumOpClasses; ++c) {
    // Files written before the attention's gradients had their own class:
    // the attention's efficiency, as those files costed them.
    if (OpClass(c) == OpClass::AttentionBackward && !(*eff)->get(classes[c])) {
      hw.efficiency[c] = hw.efficiency[(int)OpClass::Attention];
      continue;
    }
    // Files written before row-wise ops, the optimizer and transcendental
    // ops had their own class: the memory efficiency, as those files costed
    // them.
    if (OpClass(c) != OpClass::Matmul && OpClass(c) != OpClass::Attention &&
        OpClass(c) != OpClass::Memory && !(*eff)->get(classes[c])) {
      hw.efficiency[c] = hw.efficiency[(int)OpClass::Memory];
      continue;
    }
    auto v = r.number(**eff, classes[c],
                      ("hardware.efficiency." + classes[c]).str(), 0, 1);
    if (!v)
      return v.takeError();
    hw.efficiency[c] = *v;
  }

  auto bw = r.number(*root, "memory_bandwidth", "hardware.memory_bandwidth", 0,
                     kHuge);
  if (!bw)
    return bw.takeError();
  hw.memoryBandwidth = *bw;
  auto mem =
      r.number(*root, "device_memory", "hardware.device_memory", 0, kHuge);
  if (!mem)
    return mem.takeError();
  hw.deviceMemory = *mem;
  if (root->get("workspace_bytes")) {
    auto ws = r.number(*root, "workspace_bytes", "hardware.workspace_bytes", 0,
                       kHuge, true);
    if (!ws)
      return ws.takeError();
    hw.workspaceBytes = *ws;
  }
  auto dpn = r.number(*root, "devices_per_node", "hardware.devices_per_node", 1,
                      1 << 20, true);
  if (!dpn)
    return dpn.takeError();
  if (*dpn != std::floor(*dpn))
    return r.error("hardware.devices_per_node", "expected an integer");
  hw.devicesPerNode = int(*dpn);
  if (root->get("concurrent_devices_per_node")) {
    auto c = r.number(*root, "concurrent_devices_per_node",
                      "hardware.concurrent_devices_per_node", 1, 1 << 20, true);
    if (!c)
      return c.takeError();
    if (*c != std::floor(*c))
      return r.error("hardware.concurrent_devices_per_node",
                     "expected an integer");
    hw.concurrentDevicesPerNode = int(*c);
  }

  for (auto [key, slot] :
       {std::pair<StringRef, double *>{"kernel_overhead", &hw.kernelOverhead},
        {"descheduled_wait", &hw.descheduledWait}}) {
    if (!root->get(key))
      continue;
    auto v = r.number(*root, key, ("hardware." + key).str(), 0, 1, true);
    if (!v)
      return v.takeError();
    *slot = *v;
  }

  for (auto [key, slot] :
       {std::pair<StringRef, double *>{"attention_bandwidth",
                                       &hw.attentionBandwidth},
        {"attention_backward_bandwidth", &hw.attentionBackwardBandwidth}}) {
    if (!root->get(key))
      continue;
    auto v = r.number(*root, key, ("hardware." + key).str(), 0, kHuge);
    if (!v)
      return v.takeError();
    *slot = *v;
  }

  if (root->get("saved_activation_copies")) {
    auto v = r.number(*root, "saved_activation_copies",
                      "hardware.saved_activation_copies", 0, 16, true);
    if (!v)
      return v.takeError();
    hw.savedActivationCopies = *v;
  }

  auto links = r.object(*root, "links", "hardware.links");
  if (!links)
    return links.takeError();
  if (llvm::Error e =
          r.onlyKnown(**links, "hardware.links", {"intra_node", "inter_node"}))
    return std::move(e);
  if (llvm::Error e = parseLevel(r, **links, "intra_node", hw.intraNode))
    return std::move(e);
  if (llvm::Error e = parseLevel(r, **links, "inter_node", hw.interNode))
    return std::move(e);
  return hw;
}

//===----------------------------------------------------------------------===//
// Finding files
//===----------------------------------------------------------------------===//

std::vector<std::string> mlir::braid::plan::getHardwareSearchPath() {
  std::vector<std::string> dirs;
  if (std::optional<std::string> env =
          llvm::sys::Process::GetEnv("BRAID_HARDWARE_DIR"))
    if (!env->empty())
      dirs.push_back(*env);
  // /proc/self/exe on Linux: no argv0 needed.
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  if (!exe.empty()) {
    llvm::SmallString<256> dir(llvm::sys::path::parent_path(exe));
    llvm::sys::path::append(dir, "..", "share", "braid", "hardware");
    dirs.push_back(std::string(dir));
  }
#ifdef BRAID_SOURCE_DIR
  dirs.push_back(BRAID_SOURCE_DIR "/share/braid/hardware");
#endif
  return dirs;
}

std::vector<std::string> mlir::braid::plan::listHardware() {
  std::vector<std::string> names;
  for (const std::string &dir : getHardwareSearchPath()) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      StringRef path = it->path();
      if (!path.ends_with(".json"))
        continue;
      std::string stem = llvm::sys::path::stem(path).str();
      if (!llvm::is_contained(names, stem))
        names.push_back(stem);
    }
  }
  llvm::sort(names);
  return names;
}

llvm::Expected<Hardware> mlir::braid::plan::loadHardware(StringRef nameOrPath) {
  std::string path;
  if (nameOrPath.contains('/') || nameOrPath.ends_with(".json")) {
    path = nameOrPath.str();
  } else {
    for (const std::string &dir : getHardwareSearchPath()) {
      llvm::SmallString<256> candidate(dir);
      llvm::sys::path::append(candidate, nameOrPath + ".json");
      if (llvm::sys::fs::exists(candidate)) {
        path = std::string(candidate);
        break;
      }
    }
    if (path.empty()) {
      std::string known = llvm::join(listHardware(), ", ");
      return llvm::createStringError(
          "unknown hardware '%s': not a file, and no %s.json in the hardware "
          "directories (known: %s; set BRAID_HARDWARE_DIR or give a path)",
          nameOrPath.str().c_str(), nameOrPath.str().c_str(),
          known.empty() ? "none found" : known.c_str());
    }
  }
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError("cannot read hardware file '%s': %s",
                                   path.c_str(),
                                   buffer.getError().message().c_str());
  return parseHardware((*buffer)->getBuffer(), path);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

void mlir::braid::plan::writeHardware(llvm::raw_ostream &os,
                                      const Hardware &hw) {
  llvm::json::Object peaks;
  for (auto &[k, v] : hw.peakFlops)
    peaks[k] = v;
  llvm::json::Object eff;
  for (int c = 0; c < kNumOpClasses; ++c)
    eff[getOpClassName(OpClass(c))] = hw.efficiency[c];
  auto level = [](const LinkLevel &l) {
    llvm::json::Object o;
    for (int k = 0; k < kNumCollectiveKinds; ++k)
      o[getCollectiveKindName(CollectiveKind(k))] = llvm::json::Object{
          {"alpha", l.costs[k].alpha}, {"beta", l.costs[k].beta}};
    return o;
  };
  llvm::json::Object root{
      {"name", hw.name},
      {"description", hw.description},
      {"source", hw.source},
      {"peak_flops", std::move(peaks)},
      {"efficiency", std::move(eff)},
      {"memory_bandwidth", hw.memoryBandwidth},
      {"device_memory", hw.deviceMemory},
      {"workspace_bytes", hw.workspaceBytes},
      {"devices_per_node", hw.devicesPerNode},
      {"links", llvm::json::Object{{"intra_node", level(hw.intraNode)},
                                   {"inter_node", level(hw.interNode)}}}};
  if (hw.concurrentDevicesPerNode > 0)
    root["concurrent_devices_per_node"] = hw.concurrentDevicesPerNode;
  if (hw.kernelOverhead > 0)
    root["kernel_overhead"] = hw.kernelOverhead;
  if (hw.descheduledWait > 0)
    root["descheduled_wait"] = hw.descheduledWait;
  if (hw.savedActivationCopies > 0)
    root["saved_activation_copies"] = hw.savedActivationCopies;
  if (hw.attentionBandwidth > 0)
    root["attention_bandwidth"] = hw.attentionBandwidth;
  if (hw.attentionBackwardBandwidth > 0)
    root["attention_backward_bandwidth"] = hw.attentionBackwardBandwidth;
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}
