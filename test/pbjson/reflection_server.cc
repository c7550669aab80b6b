// reflection_server: a gRPC C++ server (Debian's libgrpc++) with the
// server reflection service, for grit's JSON and describe tests:
// grpc.testing.TestService (EmptyCall, UnaryCall with fill_server_id and
// fill_username, StreamingOutputCall, FullDuplexCall) and grit.test.Echo
// (kitchen.proto). Binds 127.0.0.1 only.
//
//   reflection_server [--port N]      prints "PORT n", then serves
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "extra.pb.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "kitchen.grpc.pb.h"
#include "test.grpc.pb.h"

using grpc::ServerContext;
using grpc::Status;
namespace gt = grpc::testing;

namespace {

const char kServerId[] = "grit-reflection-server";

class TestService final : public gt::TestService::Service {
  Status EmptyCall(ServerContext *, const gt::Empty *, gt::Empty *) override {
    return Status::OK;
  }

  Status UnaryCall(ServerContext *ctx, const gt::SimpleRequest *req,
                   gt::SimpleResponse *resp) override {
    if (req->response_size() > 0)
      resp->mutable_payload()->mutable_body()->assign(
          static_cast<size_t>(req->response_size()), 'x');
    resp->mutable_payload()->set_type(req->response_type());
    if (req->fill_server_id())
      resp->set_server_id(kServerId);
    if (req->fill_username()) {
      // The call's credentials, as this server saw them (issue 25): the
      // authorization header's values joined with ",", else "grit-user".
      std::string auth;
      auto range = ctx->client_metadata().equal_range("authorization");
      for (auto it = range.first; it != range.second; ++it)
        auth += (auth.empty() ? "" : ",") +
                std::string(it->second.data(), it->second.size());
      resp->set_username(auth.empty() ? "grit-user" : auth);
    }
    if (req->has_response_status() && req->response_status().code() != 0)
      return Status(static_cast<grpc::StatusCode>(req->response_status().code()),
                    req->response_status().message());
    return Status::OK;
  }

  Status StreamingOutputCall(
      ServerContext *, const gt::StreamingOutputCallRequest *req,
      grpc::ServerWriter<gt::StreamingOutputCallResponse> *w) override {
    for (const auto &p : req->response_parameters()) {
      gt::StreamingOutputCallResponse r;
      r.mutable_payload()->mutable_body()->assign(
          static_cast<size_t>(p.size()), 'y');
      w->Write(r);
    }
    return Status::OK;
  }

  Status FullDuplexCall(
      ServerContext *,
      grpc::ServerReaderWriter<gt::StreamingOutputCallResponse,
                               gt::StreamingOutputCallRequest> *s) override {
    gt::StreamingOutputCallRequest req;
    while (s->Read(&req)) {
      for (const auto &p : req.response_parameters()) {
        gt::StreamingOutputCallResponse r;
        r.mutable_payload()->mutable_body()->assign(
            static_cast<size_t>(p.size()), 'z');
        s->Write(r);
      }
    }
    return Status::OK;
  }
};

class EchoService final : public grit::test::Echo::Service {
  Status Echo(ServerContext *, const grit::test::Kitchen *req,
              grit::test::Kitchen *resp) override {
    *resp = *req;
    resp->set_server_note("from the server");
    return Status::OK;
  }

  // The request back; asked with customName "pack-extra", its any holds a
  // grit.extra.Extra (extra.proto, which kitchen.proto does not import).
  Status EchoWkt(ServerContext *, const grit::test::Wkt *req,
                 grit::test::Wkt *resp) override {
    *resp = *req;
    if (req->renamed() == "pack-extra") {
      grit::extra::Extra x;
      x.set_note("packed by the server");
      x.set_n(7);
      resp->mutable_any()->PackFrom(x);
    }
    return Status::OK;
  }

  // Every standard detail of google/rpc/error_details.proto, then one of
  // a type no client has (its URL names grit.test.Secret).
  Status Fail(ServerContext *, const grit::test::FailRequest *req,
              google::protobuf::Empty *) override {
    google::rpc::Status st;
    int code = req->code() > 0 && req->code() < 17 ? req->code() : 3;
    st.set_code(code);
    st.set_message(req->message());
    google::rpc::BadRequest br;
    auto *fv = br.add_field_violations();
    fv->set_field("name");
    fv->set_description("must not be empty");
    st.add_details()->PackFrom(br);
    google::rpc::ErrorInfo ei;
    ei.set_reason("QUOTA_LOW");
    ei.set_domain("grit.test");
    (*ei.mutable_metadata())["zone"] = "z1";
    st.add_details()->PackFrom(ei);
    google::rpc::RetryInfo ri;
    ri.mutable_retry_delay()->set_seconds(2);
    ri.mutable_retry_delay()->set_nanos(500000000);
    st.add_details()->PackFrom(ri);
    google::rpc::QuotaFailure qf;
    auto *qv = qf.add_violations();
    qv->set_subject("project:1");
    qv->set_description("daily limit");
    st.add_details()->PackFrom(qf);
    google::rpc::PreconditionFailure pf;
    auto *pv = pf.add_violations();
    pv->set_type("TOS");
    pv->set_subject("user");
    pv->set_description("terms not accepted");
    st.add_details()->PackFrom(pf);
    google::rpc::ResourceInfo rs;
    rs.set_resource_type("book");
    rs.set_resource_name("shelves/1/books/2");
    rs.set_owner("alice");
    rs.set_description("gone");
    st.add_details()->PackFrom(rs);
    google::rpc::Help h;
    auto *l = h.add_links();
    l->set_description("docs");
    l->set_url("https://example.invalid/help");
    st.add_details()->PackFrom(h);
    google::rpc::LocalizedMessage lm;
    lm.set_locale("fr-FR");
    lm.set_message("\u00e9chec");
    st.add_details()->PackFrom(lm);
    google::rpc::DebugInfo di;
    di.add_stack_entries("frame 1");
    di.add_stack_entries("frame 2");
    di.set_detail("boom");
    st.add_details()->PackFrom(di);
    google::protobuf::Any *secret = st.add_details();
    secret->set_type_url("type.googleapis.com/grit.test.Secret");
    secret->set_value(std::string("\x0a\x03" "abc", 5));
    return Status(static_cast<grpc::StatusCode>(code), req->message(),
                  st.SerializeAsString());
  }

  Status EchoStream(ServerContext *,
                    grpc::ServerReaderWriter<grit::test::Kitchen,
                                             grit::test::Kitchen> *s) override {
    grit::test::Kitchen k;
    while (s->Read(&k)) {
      k.set_server_note("from the server");
      s->Write(k);
    }
    return Status::OK;
  }
};

}  // namespace

static std::string read_file(const char *path) {
  std::string out;
  if (FILE *f = std::fopen(path, "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
      out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

int main(int argc, char **argv) {
  int port = 0;
  const char *cert = nullptr, *key = nullptr;
  for (int i = 1; i + 1 < argc; i++) {
    if (std::strcmp(argv[i], "--port") == 0)
      port = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--tls-cert") == 0)
      cert = argv[++i];
    else if (std::strcmp(argv[i], "--tls-key") == 0)
      key = argv[++i];
  }
  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::InsecureServerCredentials();
  if (cert && key) {  // TLS with a certificate made by the test
    grpc::SslServerCredentialsOptions o;
    o.pem_key_cert_pairs.push_back({read_file(key), read_file(cert)});
    creds = grpc::SslServerCredentials(o);
  }
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  TestService test;
  EchoService echo;
  int bound = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:" + std::to_string(port), creds, &bound);
  b.RegisterService(&test);
  b.RegisterService(&echo);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (!server || bound == 0) {
    std::fprintf(stderr, "reflection_server: cannot listen\n");
    return 1;
  }
  std::printf("PORT %d\n", bound);
  std::fflush(stdout);
  server->Wait();
  return 0;
}
