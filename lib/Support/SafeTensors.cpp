//===- SafeTensors.cpp - Read and write .safetensors files -----------------===//

#include "braid/Support/SafeTensors.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace llvm;
using namespace mlir::braid;

// A header larger than this is certainly corrupt (the format's own
// implementation uses the same bound).
static constexpr uint64_t kMaxHeaderBytes = 100 * 1024 * 1024;

static Error fail(StringRef file, const Twine &msg) {
  return createStringError(inconvertibleErrorCode(),
                           file + ": " + msg);
}

static double decode(const char *p, DType dtype) {
  using namespace support::endian;
  switch (dtype) {
  case DType::F64: {
    uint64_t bits = read64le(p);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  case DType::F32: {
    uint32_t bits = read32le(p);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  case DType::F16:
    return APFloat(APFloat::IEEEhalf(), APInt(16, read16le(p)))
        .convertToDouble();
  case DType::BF16:
    return APFloat(APFloat::BFloat(), APInt(16, read16le(p)))
        .convertToDouble();
  case DType::I64:
    return static_cast<double>(static_cast<int64_t>(read64le(p)));
  case DType::I32:
    return static_cast<double>(static_cast<int32_t>(read32le(p)));
  }
  llvm_unreachable("unknown DType");
}

// v as an integer of type Int, saturating and with NaN as 0: the cast alone
// is undefined out of range, and an I64 read as a double can be 2^63
// (INT64_MAX rounds up).
template <typename Int> static Int saturate(double v) {
  constexpr double lo = static_cast<double>(std::numeric_limits<Int>::min());
  constexpr double hi = -lo; // 2^63 or 2^31: just past the largest Int
  if (std::isnan(v))
    return 0;
  if (v < lo)
    return std::numeric_limits<Int>::min();
  if (v >= hi)
    return std::numeric_limits<Int>::max();
  return static_cast<Int>(v);
}

static void encode(double v, DType dtype, char *p) {
  using namespace support::endian;
  auto half = [&](const fltSemantics &sem) {
    APFloat f(v);
    bool lost;
    f.convert(sem, APFloat::rmNearestTiesToEven, &lost);
    write16le(p, f.bitcastToAPInt().getZExtValue());
  };
  switch (dtype) {
  case DType::F64: {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    write64le(p, bits);
    return;
  }
  case DType::F32: {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    write32le(p, bits);
    return;
  }
  case DType::F16:
    return half(APFloat::IEEEhalf());
  case DType::BF16:
    return half(APFloat::BFloat());
  case DType::I64:
    write64le(p, static_cast<uint64_t>(saturate<int64_t>(v)));
    return;
  case DType::I32:
    write32le(p, static_cast<uint32_t>(saturate<int32_t>(v)));
    return;
  }
}

Expected<SafeTensorsFile> mlir::braid::parseSafeTensors(StringRef bytes,
                                                        StringRef file) {
  if (bytes.size() < 8)
    return fail(file, "file is " + Twine(bytes.size()) +
                          " bytes, too short for the 8-byte header length");
  uint64_t headerLen = support::endian::read64le(bytes.data());
  if (headerLen > kMaxHeaderBytes || headerLen > bytes.size() - 8)
    return fail(file, "header length " + Twine(headerLen) +
                          " runs past the end of the file (" +
                          Twine(bytes.size()) + " bytes); truncated or not "
                          "a safetensors file");
  StringRef headerText = bytes.substr(8, headerLen);
  StringRef data = bytes.drop_front(8 + headerLen);

  Expected<json::Value> header = json::parse(headerText);
  if (!header)
    return fail(file, "header is not valid JSON: " +
                          toString(header.takeError()));
  json::Object *root = header->getAsObject();
  if (!root)
    return fail(file, "header must be a JSON object");

  struct Entry {
    std::string name;
    DType dtype;
    SmallVector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  SafeTensorsFile result;
  for (auto &kv : *root) {
    std::string name = kv.first.str();
    if (name == "__metadata__") {
      json::Object *meta = kv.second.getAsObject();
      if (!meta)
        return fail(file, "__metadata__ must be an object of strings");
      for (auto &m : *meta) {
        std::optional<StringRef> s = m.second.getAsString();
        if (!s)
          return fail(file, "__metadata__ value '" + m.first.str() +
                                "' is not a string");
        result.metadata[m.first.str()] = s->str();
      }
      continue;
    }
    json::Object *obj = kv.second.getAsObject();
    if (!obj)
      return fail(file, "entry '" + name + "' is not an object");
    Entry e;
    e.name = name;
    std::optional<StringRef> dtype = obj->getString("dtype");
    if (!dtype)
      return fail(file, "tensor '" + name + "' has no dtype");
    std::optional<DType> parsed = parseDType(*dtype);
    if (!parsed)
      return fail(file, "tensor '" + name + "' has unsupported dtype '" +
                            *dtype + "' (supported: F64 F32 F16 BF16 I64 I32)");
    e.dtype = *parsed;
    json::Array *shape = obj->getArray("shape");
    if (!shape)
      return fail(file, "tensor '" + name + "' has no shape array");
    for (json::Value &d : *shape) {
      std::optional<int64_t> dim = d.getAsInteger();
      if (!dim || *dim < 0 || *dim > (int64_t(1) << 40))
        return fail(file, "tensor '" + name +
                              "' has an invalid dimension in its shape");
      e.shape.push_back(*dim);
    }
    // Bounded before each product, so that it cannot wrap: [2^32, 2^32]
    // would wrap to 0 elements and pass for an empty tensor.
    uint64_t count = llvm::is_contained(e.shape, 0) ? 0 : 1;
    for (int64_t dim : e.shape) {
      if (count == 0)
        break;
      if (uint64_t(dim) > (uint64_t(1) << 40) / count)
        return fail(file, "tensor '" + name + "' is implausibly large");
      count *= dim;
    }
    json::Array *offsets = obj->getArray("data_offsets");
    std::optional<int64_t> begin, end;
    if (offsets && offsets->size() == 2) {
      begin = (*offsets)[0].getAsInteger();
      end = (*offsets)[1].getAsInteger();
    }
    if (!begin || !end || *begin < 0 || *end < *begin)
      return fail(file, "tensor '" + name +
                            "' needs data_offsets [begin, end] with "
                            "0 <= begin <= end");
    e.begin = *begin;
    e.end = *end;
    if (e.end > data.size())
      return fail(file, "tensor '" + name + "' data_offsets [" +
                            Twine(e.begin) + ", " + Twine(e.end) +
                            "] run past the end of the data (" +
                            Twine(data.size()) + " bytes); truncated file?");
    uint64_t expected = count * dtypeSize(e.dtype);
    if (e.end - e.begin != expected)
      return fail(file, "tensor '" + name + "' has " +
                            Twine(e.end - e.begin) + " bytes of data but its "
                            "dtype and shape need " + Twine(expected));
    entries.push_back(std::move(e));
  }

  llvm::sort(entries, [](const Entry &a, const Entry &b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      return fail(file, "tensors '" + entries[i - 1].name + "' and '" +
                            entries[i].name + "' overlap in the data");

  for (Entry &e : entries) {
    Tensor t(e.shape, e.dtype);
    unsigned size = dtypeSize(e.dtype);
    const char *p = data.data() + e.begin;
    for (int64_t i = 0, n = t.numElements(); i < n; ++i)
      t[i] = decode(p + i * size, e.dtype);
    result.tensors.insert({e.name, std::move(t)});
  }
  return result;
}

Expected<SafeTensorsFile> mlir::braid::readSafeTensors(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path, "cannot read: " + buffer.getError().message());
  return parseSafeTensors((*buffer)->getBuffer(), path);
}

std::string mlir::braid::serializeSafeTensors(
    const TensorMap &tensors, const std::map<std::string, std::string> &meta) {
  json::Object header;
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    uint64_t bytes = t.numElements() * dtypeSize(t.dtype());
    json::Array shape;
    for (int64_t d : t.shape())
      shape.push_back(d);
    header[name] = json::Object{{"dtype", dtypeName(t.dtype())},
                                {"shape", std::move(shape)},
                                {"data_offsets", json::Array{offset, offset + bytes}}};
    offset += bytes;
  }
  if (!meta.empty()) {
    json::Object m;
    for (const auto &[k, v] : meta)
      m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::string headerText;
  raw_string_ostream(headerText) << json::Value(std::move(header));
  // Pad with spaces so the data starts 8-byte aligned.
  while ((8 + headerText.size()) % 8)
    headerText += ' ';

  std::string out(8, '\0');
  support::endian::write64le(out.data(), headerText.size());
  out += headerText;
  size_t dataStart = out.size();
  out.resize(dataStart + offset);
  char *p = out.data() + dataStart;
  for (const auto &[name, t] : tensors) {
    unsigned size = dtypeSize(t.dtype());
    for (int64_t i = 0, n = t.numElements(); i < n; ++i, p += size)
      encode(t[i], t.dtype(), p);
  }
  return out;
}

Error mlir::braid::writeSafeTensors(
    StringRef path, const TensorMap &tensors,
    const std::map<std::string, std::string> &metadata) {
  std::string bytes = serializeSafeTensors(tensors, metadata);
  SmallString<256> tmp(path);
  tmp += ".tmp";
  {
    std::error_code ec;
    raw_fd_ostream os(tmp, ec, sys::fs::OF_None);
    if (ec)
      return fail(path, "cannot write: " + ec.message());
    os << bytes;
    os.close();
    if (os.has_error()) {
      std::error_code err = os.error();
      os.clear_error();
      sys::fs::remove(tmp);
      return fail(path, "write failed: " + err.message());
    }
  }
  if (std::error_code ec = sys::fs::rename(tmp, path)) {
    sys::fs::remove(tmp);
    return fail(path, "cannot rename the temporary file into place: " +
                          ec.message());
  }
  return Error::success();
}
