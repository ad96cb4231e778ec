#include "server/tls.h"

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "arbiter/v1/arbiter.grpc.pb.h"

namespace arbiter::server {
namespace {

namespace fs = std::filesystem;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir_template = (fs::temp_directory_path() / "arbiter-tls-XXXXXX").string();
    dir_ = mkdtemp(dir_template.data());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A self-signed certificate for 127.0.0.1 made by the openssl tool, so no
  // key lives in the repository. False when the tool is missing.
  bool MakeCertificate(const std::string& name) {
    const std::string command =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2"
        " -subj /CN=arbiter-test -addext subjectAltName=IP:127.0.0.1"
        " -keyout '" + Path(name + ".key") + "' -out '" + Path(name + ".crt") + "' >/dev/null 2>&1";
    return std::system(command.c_str()) == 0;
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
};

TEST_F(TlsTest, NoFilesMeansPlaintext) {
  auto creds = MakeServerCredentials({});
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_NE(*creds, nullptr);
}

TEST_F(TlsTest, CertificateWithoutKeyIsRefused) {
  EXPECT_EQ(MakeServerCredentials({.cert_file = Path("a.crt"), .key_file = ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeServerCredentials({.cert_file = "", .key_file = Path("a.key")}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, UnreadableFileIsNotFoundNamingIt) {
  auto creds = MakeServerCredentials({.cert_file = Path("missing.crt"), .key_file = Path("missing.key")});
  EXPECT_EQ(creds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(creds.status().message().find("missing.crt"), std::string::npos);
}

TEST_F(TlsTest, FileWithoutPemIsRefused) {
  std::ofstream(Path("der.crt")) << "\x30\x82\x01\x0a not pem";
  std::ofstream(Path("der.key")) << "\x30\x82\x01\x0a not pem";
  auto creds = MakeServerCredentials({.cert_file = Path("der.crt"), .key_file = Path("der.key")});
  EXPECT_EQ(creds.status().code(), absl::StatusCode::kInvalidArgument);
}

// A listener with the returned credentials completes a TLS handshake with a
// client trusting the certificate, and none with a client trusting another.
TEST_F(TlsTest, ListenerServesTlsToClientsTrustingTheCertificate) {
  if (!MakeCertificate("server") || !MakeCertificate("other")) {
    GTEST_SKIP() << "the openssl tool is needed to make a test certificate";
  }
  auto creds = MakeServerCredentials({.cert_file = Path("server.crt"), .key_file = Path("server.key")});
  ASSERT_TRUE(creds.ok()) << creds.status();

  int port = 0;
  v1::Admin::Service unimplemented;  // every method answers UNIMPLEMENTED
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", *creds, &port);
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  const std::string target = "127.0.0.1:" + std::to_string(port);

  // A call that gets through the handshake is UNIMPLEMENTED.
  auto call = [&target](std::shared_ptr<grpc::ChannelCredentials> channel_creds) {
    auto stub = v1::Admin::NewStub(grpc::CreateChannel(target, channel_creds));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::ServerInfoResponse response;
    return stub->ServerInfo(&context, v1::ServerInfoRequest(), &response).error_code();
  };
  grpc::SslCredentialsOptions trusting;
  trusting.pem_root_certs = Read("server.crt");
  EXPECT_EQ(call(grpc::SslCredentials(trusting)), grpc::StatusCode::UNIMPLEMENTED);

  grpc::SslCredentialsOptions distrusting;
  distrusting.pem_root_certs = Read("other.crt");
  EXPECT_EQ(call(grpc::SslCredentials(distrusting)), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(call(grpc::InsecureChannelCredentials()), grpc::StatusCode::UNAVAILABLE);

  server->Shutdown();
}

}  // namespace
}  // namespace arbiter::server
