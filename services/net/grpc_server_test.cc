#include "services/net/grpc_server.h"

#include <gtest/gtest.h>

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/service_type.h>

namespace gaptrain {
namespace {

ServerFlags Flags(const std::string& listen) {
  ServerFlags flags;
  flags.listen = listen;
  return flags;
}

TEST(GrpcServer, ServesOnThePortItBoundWithHealth) {
  grpc::Service service;
  bool configured = false;
  std::unique_ptr<grpc::Server> server;
  int port = -1;
  Status s = StartGrpcServer(Flags("127.0.0.1:0"), &service,
                             [&](grpc::ServerBuilder*) { configured = true; }, &server, &port);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(configured);
  ASSERT_NE(server, nullptr);
  EXPECT_GT(port, 0);
  EXPECT_NE(server->GetHealthCheckService(), nullptr);
  server->Shutdown();
}

TEST(GrpcServer, AnAddressItCannotBindNamesListen) {
  grpc::Service service;
  std::unique_ptr<grpc::Server> server;
  int port = -1;
  Status s = StartGrpcServer(Flags("192.0.2.1:0"), &service, nullptr, &server, &port);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_EQ(s.message(), "--listen: cannot serve gRPC on 192.0.2.1:0");
  EXPECT_EQ(server, nullptr);
}

TEST(GrpcServer, TlsFlagErrorsNameTheFlag) {
  grpc::Service service;
  ServerFlags flags = Flags("127.0.0.1:0");
  flags.tls_cert = "/nonexistent/cert.pem";
  flags.tls_key = "/nonexistent/key.pem";
  std::unique_ptr<grpc::Server> server;
  int port = -1;
  Status s = StartGrpcServer(flags, &service, nullptr, &server, &port);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("--tls-cert: ", 0), 0u) << s.message();
  EXPECT_EQ(server, nullptr);
}

}  // namespace
}  // namespace gaptrain
