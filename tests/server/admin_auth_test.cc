#include "server/admin_auth.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

// A file under a fresh temp directory, removed with it.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    std::string dir_template = (std::filesystem::temp_directory_path() / "arbiter-auth-XXXXXX").string();
    dir_ = mkdtemp(dir_template.data());
    path_ = dir_ + "/token";
    std::ofstream(path_) << content;
  }
  ~TempFile() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

TEST(IsLoopbackAddressTest, LoopbackListenersAreRecognized) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:50051"));
  EXPECT_TRUE(IsLoopbackAddress("127.8.9.10:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:50051"));
  EXPECT_TRUE(IsLoopbackAddress("LOCALHOST:1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:50051"));
  EXPECT_TRUE(IsLoopbackAddress("[::ffff:127.0.0.1]:50051"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/run/arbiter/arbiterd.sock"));
}

TEST(IsLoopbackAddressTest, ReachableListenersAreNotLoopback) {
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:50051"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:50051"));
  EXPECT_FALSE(IsLoopbackAddress("10.1.2.3:50051"));
  EXPECT_FALSE(IsLoopbackAddress("128.0.0.1:50051"));
  EXPECT_FALSE(IsLoopbackAddress("arbiter.example.com:50051"));
  EXPECT_FALSE(IsLoopbackAddress("localhost.example.com:50051"));
  EXPECT_FALSE(IsLoopbackAddress(":50051"));  // all interfaces
  EXPECT_FALSE(IsLoopbackAddress(""));
}

TEST(ConstantTimeEqualsTest, EqualOnlyWhenEveryByteAndTheLengthMatch) {
  EXPECT_TRUE(ConstantTimeEquals("s3cret-token", "s3cret-token"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret-tokeN", "s3cret-token"));
  EXPECT_FALSE(ConstantTimeEquals("X3cret-token", "s3cret-token"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cret-token"));                // a prefix
  EXPECT_FALSE(ConstantTimeEquals("s3cret-tokens3cret-token", "s3cret-token"));  // the secret twice
  EXPECT_FALSE(ConstantTimeEquals("", "s3cret-token"));
  EXPECT_FALSE(ConstantTimeEquals("", ""));  // an empty secret matches nothing
}

TEST(ReadSecretFileTest, SurroundingWhitespaceIsTrimmed) {
  TempFile file("  \n tok3n-value \r\n\n");
  auto token = ReadSecretFile(file.path());
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "tok3n-value");
}

TEST(ReadSecretFileTest, WhitespaceOnlyFileIsRefused) {
  TempFile file(" \n\t\n");
  auto token = ReadSecretFile(file.path());
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadSecretFileTest, MissingFileIsNotFoundNamingThePath) {
  auto token = ReadSecretFile("/nonexistent/arbiter/token");
  EXPECT_EQ(token.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(token.status().message().find("/nonexistent/arbiter/token"), std::string::npos);
}

TEST(AdminAuthTest, NoTokenOnANonLoopbackListenerRefusesToStart) {
  auto auth = AdminAuth::Create({.token_file = "", .listen = "0.0.0.0:50051"});
  EXPECT_EQ(auth.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(auth.status().message().find("--admin-token-file"), std::string::npos);
}

TEST(AdminAuthTest, NoTokenOnLoopbackServesAdminWithoutCredentials) {
  auto auth = AdminAuth::Create({.token_file = "", .listen = "127.0.0.1:50051"});
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_FALSE((*auth)->requires_token());
  EXPECT_TRUE((*auth)->Check(Metadata{}).ok());
  EXPECT_EQ((*auth)->identity(), "loopback");
}

TEST(AdminAuthTest, EmptyTokenFileRefusesToStart) {
  TempFile file("\n");
  auto auth = AdminAuth::Create({.token_file = file.path(), .listen = "0.0.0.0:50051"});
  EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AdminAuthTest, TokenFileGuardsEveryListener) {
  TempFile file("tok3n-value\n");
  for (const char* listen : {"0.0.0.0:50051", "127.0.0.1:50051"}) {
    auto auth = AdminAuth::Create({.token_file = file.path(), .listen = listen});
    ASSERT_TRUE(auth.ok()) << auth.status();
    EXPECT_TRUE((*auth)->requires_token());
    EXPECT_EQ((*auth)->Check(Metadata{}).code(), absl::StatusCode::kUnauthenticated) << listen;
  }
}

TEST(AdminAuthTest, MissingAuthorizationIsUnauthenticated) {
  auto auth = AdminAuth::WithToken("tok3n-value");
  std::string key = "x-other", value = "Bearer tok3n-value";
  EXPECT_EQ(auth->Check(Metadata{{key, value}}).code(), absl::StatusCode::kUnauthenticated);
}

TEST(AdminAuthTest, NonBearerSchemeIsUnauthenticated) {
  auto auth = AdminAuth::WithToken("tok3n-value");
  std::string key = "authorization";
  for (std::string value : {"Basic dG9rM24tdmFsdWU=", "tok3n-value", "Bearer", "Bearertok3n-value"}) {
    EXPECT_EQ(auth->Check(Metadata{{key, value}}).code(), absl::StatusCode::kUnauthenticated) << value;
  }
}

TEST(AdminAuthTest, WrongBearerTokenIsPermissionDeniedWithoutEchoingIt) {
  auto auth = AdminAuth::WithToken("tok3n-value");
  std::string key = "authorization", value = "Bearer guessed-value";
  const absl::Status status = auth->Check(Metadata{{key, value}});
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message().find("guessed-value"), std::string::npos);
  EXPECT_EQ(status.message().find("tok3n-value"), std::string::npos);
}

TEST(AdminAuthTest, RightBearerTokenIsAccepted) {
  auto auth = AdminAuth::WithToken("tok3n-value");
  std::string key = "authorization";
  for (std::string value : {"Bearer tok3n-value", "bearer tok3n-value", "Bearer   tok3n-value "}) {
    EXPECT_TRUE(auth->Check(Metadata{{key, value}}).ok()) << value;
  }
}

TEST(AdminAuthTest, IdentityNamesTheTokenByHashNeverByValue) {
  auto a = AdminAuth::WithToken("tok3n-value");
  auto b = AdminAuth::WithToken("another-token");
  EXPECT_EQ(a->identity().rfind("token:", 0), 0u);
  EXPECT_EQ(a->identity().size(), std::string("token:").size() + 8);
  EXPECT_EQ(a->identity().find("tok3n"), std::string::npos);
  EXPECT_EQ(a->identity(), AdminAuth::WithToken("tok3n-value")->identity());
  EXPECT_NE(a->identity(), b->identity());
}

}  // namespace
}  // namespace arbiter::server
