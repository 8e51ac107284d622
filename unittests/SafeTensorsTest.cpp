//===- SafeTensorsTest.cpp - safetensors reading and writing ---------------===//

#include "braid/Support/SafeTensors.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

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
