//===- SafeTensorsTest.cpp - safetensors reading and writing ---------------===//

#include "braid/Support/SafeTensors.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>

using namespace mlir::braid;

namespace {

TensorMap sample() {
  TensorMap m;
  Tensor a({2, 3}, DType::F32);
  for (int i = 0; i < 6; ++i)
    a[i] = 0.5 * i - 1;
  Tensor b({4}, DType::BF16);
  for (int i = 0; i < 4; ++i)
    b[i] = i * 0.25;
  Tensor c({3}, DType::I64);
  c[0] = -5;
  c[1] = 0;
  c[2] = 1LL << 40;
  Tensor d({}, DType::F64, 3.141592653589793);
  Tensor e({2}, DType::F16, 65504.0);
  Tensor f({2}, DType::I32, -7);
  m.insert({"a", a});
  m.insert({"b.weight", b});
  m.insert({"c", c});
  m.insert({"d", d});
  m.insert({"e", e});
  m.insert({"f", f});
  return m;
}

std::string errorOf(llvm::StringRef bytes) {
  auto parsed = parseSafeTensors(bytes, "x.st");
  if (parsed)
    return "";
  return llvm::toString(parsed.takeError());
}

std::string withHeader(llvm::StringRef json, llvm::StringRef data = "") {
  std::string out(8, '\0');
  llvm::support::endian::write64le(out.data(), json.size());
  return out + json.str() + data.str();
}

TEST(SafeTensorsTest, RoundTripsEveryDType) {
  TensorMap m = sample();
  std::string bytes = serializeSafeTensors(m, {{"format", "pt"}});
  auto parsed = parseSafeTensors(bytes, "mem");
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(parsed->metadata.at("format"), "pt");
  ASSERT_EQ(parsed->tensors.size(), m.size());
  for (auto &[name, t] : m) {
    const Tensor &u = parsed->tensors.find(name)->second;
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_EQ(u.shape(), t.shape()) << name;
    for (int64_t i = 0; i < t.numElements(); ++i)
      EXPECT_EQ(u[i], t[i]) << name << "[" << i << "]";
  }
}

TEST(SafeTensorsTest, DataStartsAligned) {
  std::string bytes = serializeSafeTensors(sample());
  uint64_t n = llvm::support::endian::read64le(bytes.data());
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(SafeTensorsTest, LayoutIsLittleEndianRaw) {
  TensorMap m;
  Tensor t({1}, DType::F32, 1.0);
  m.insert({"x", t});
  std::string bytes = serializeSafeTensors(m);
  uint64_t n = llvm::support::endian::read64le(bytes.data());
  ASSERT_EQ(bytes.size(), 8 + n + 4);
  float f;
  std::memcpy(&f, bytes.data() + 8 + n, 4);
  EXPECT_EQ(f, 1.0f);
  EXPECT_NE(bytes.find("\"data_offsets\":[0,4]"), std::string::npos);
}

TEST(SafeTensorsTest, RejectsDamagedFiles) {
  EXPECT_NE(errorOf("abc").find("too short for the 8-byte header length"),
            std::string::npos);
  std::string lying(8, '\0');
  llvm::support::endian::write64le(lying.data(), 1000);
  EXPECT_NE(errorOf(lying + "{}").find("runs past the end of the file"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader("{\"a\": ")).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader("[1]")).find("must be a JSON object"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader(R"({"a": {"dtype": "X", "shape": [], "data_offsets": [0, 4]}})",
                               "abcd"))
                .find("unsupported dtype 'X'"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                               "abcd"))
                .find("invalid dimension"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                               "abcd"))
                .find("run past the end of the data"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})",
                               "abcd"))
                .find("has 4 bytes of data but its dtype and shape need 8"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})",
                               "abcd"))
                .find("0 <= begin <= end"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader(R"({"a": {"dtype": "F32", "shape": [1]}})", "abcd"))
                .find("needs data_offsets"),
            std::string::npos);
}

// Found with fuzz_safetensors.cpp (its seed wrap-2^64 holds it): the element
// count of [2^32, 2^32] wrapped to 0, the tensor passed for empty, and
// Tensor's element count overflowed.
TEST(SafeTensorsTest, ElementCountCannotWrap) {
  EXPECT_NE(
      errorOf(
          withHeader(
              R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})"))
          .find("tensor 'a' is implausibly large"),
      std::string::npos);
  // Large dimensions next to a zero one are an empty tensor.
  auto empty = parseSafeTensors(
      withHeader(
          R"({"a": {"dtype": "F32", "shape": [1099511627776, 1099511627776, 0], "data_offsets": [0, 0]}})"),
      "x.st");
  ASSERT_TRUE(bool(empty)) << llvm::toString(empty.takeError());
  EXPECT_EQ(empty->tensors.front().second.numElements(), 0);
}

// Found with fuzz_safetensors.cpp's round trip (its seed i64-max holds it):
// INT64_MAX reads as 2^63, and writing it back cast 2^63 to int64_t, which
// is undefined. Integers now saturate, and NaN writes as 0.
TEST(SafeTensorsTest, IntegersSaturateOnWrite) {
  TensorMap m;
  Tensor big({4}, DType::I64);
  big[0] = static_cast<double>(INT64_MAX); // 2^63
  big[1] = -1e300;
  big[2] = std::nan("");
  big[3] = -5;
  Tensor small({3}, DType::I32);
  small[0] = 1e10;
  small[1] = -1e10;
  small[2] = 7;
  m.insert({"big", big});
  m.insert({"small", small});
  std::string bytes = serializeSafeTensors(m);
  uint64_t headerLen = llvm::support::endian::read64le(bytes.data());
  const char *data = bytes.data() + 8 + headerLen;
  using llvm::support::endian::read32le;
  using llvm::support::endian::read64le;
  EXPECT_EQ(static_cast<int64_t>(read64le(data)), INT64_MAX);
  EXPECT_EQ(static_cast<int64_t>(read64le(data + 8)), INT64_MIN);
  EXPECT_EQ(static_cast<int64_t>(read64le(data + 16)), 0);
  EXPECT_EQ(static_cast<int64_t>(read64le(data + 24)), -5);
  EXPECT_EQ(static_cast<int32_t>(read32le(data + 32)), INT32_MAX);
  EXPECT_EQ(static_cast<int32_t>(read32le(data + 36)), INT32_MIN);
  EXPECT_EQ(static_cast<int32_t>(read32le(data + 40)), 7);
}

TEST(SafeTensorsTest, WriteIsAtomicAndReadable) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("braid-st", dir));
  std::string path = (dir + "/w.safetensors").str();
  ASSERT_FALSE(bool(writeSafeTensors(path, sample())));
  auto back = readSafeTensors(path);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->tensors.size(), 6u);
  EXPECT_FALSE(llvm::sys::fs::exists(path + ".tmp"));
  // A failing write (the temporary path is a directory) keeps the old file.
  ASSERT_FALSE(llvm::sys::fs::create_directory(path + ".tmp"));
  TensorMap other;
  other.insert({"z", Tensor({1}, DType::F32)});
  llvm::Error err = writeSafeTensors(path, other);
  EXPECT_TRUE(bool(err));
  llvm::consumeError(std::move(err));
  auto still = readSafeTensors(path);
  ASSERT_TRUE(bool(still));
  EXPECT_EQ(still->tensors.size(), 6u);
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
