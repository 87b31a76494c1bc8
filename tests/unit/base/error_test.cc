#include <gtest/gtest.h>

#include <cerrno>

#include "msgr/base/error.h"

namespace siphon {
namespace {

TEST(Error, CategoryNamesAndMessages) {
  std::error_code ec = errc::bad_crc;
  EXPECT_EQ(ec.category().name(), std::string("siphon"));
  EXPECT_EQ(ec.message(), "CRC mismatch");
  EXPECT_EQ(to_string(errc::bad_crc), "bad_crc");
  EXPECT_EQ(to_string(errc::rnr_retry_exceeded), "rnr_retry_exceeded");
  EXPECT_FALSE(std::error_code(errc::ok));
}

TEST(Error, PortableConditions) {
  EXPECT_EQ(std::error_code(errc::timed_out), std::errc::timed_out);
  EXPECT_EQ(std::error_code(errc::no_device), std::errc::no_such_device);
}

TEST(Error, FromErrno) {
  EXPECT_EQ(from_errno(ECONNREFUSED), errc::connection_refused);
  EXPECT_EQ(from_errno(EPIPE), errc::connection_reset);
  EXPECT_EQ(from_errno(ENODEV), errc::device_not_found);
  EXPECT_EQ(from_errno(12345), errc::io_error);
  EXPECT_FALSE(from_errno(0));
}

TEST(Error, SetupErrorNamesCauseAndRemedy) {
  SetupError e(errc::no_device, "no RDMA device found",
               "set ms_async_rdma_device_name = soft0 to use the software fabric");
  EXPECT_STREQ(e.what(),
               "no RDMA device found: set ms_async_rdma_device_name = soft0 to use the software fabric");
  EXPECT_EQ(e.code(), errc::no_device);
}

}  // namespace
}  // namespace siphon
