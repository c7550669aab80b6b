// bench_server: grpc.testing.TestService on Debian's libgrpc++ (callback
// API), the common server of bench/run. EmptyCall answers at once,
// UnaryCall returns a payload of response_size bytes, StreamingOutputCall
// writes one message per response_parameters entry, StreamingInputCall
// reads every message (sleeping --read-delay-us after each: a server that
// reads slowly) and answers with their payload total. With --orca-cpu U
// (issue 26, gRFC A51) every EmptyCall and UnaryCall ends with an
// endpoint-load-metrics-bin trailer: an xds.data.orca.v3.OrcaLoadReport
// {cpu_utilization = U, rps_fractional = 1000} serialized by hand (two
// fixed64 fields, 1 and 6): libgrpc++ 1.51's
// experimental::CallMetricRecorder records cpu, memory, utilization and
// request costs but has no qps (rps_fractional), which
// weighted_round_robin's weights need.
//
//   bench_server [--port N] [--host ADDR] [--max-recv BYTES]
//                [--read-delay-us US] [--orca-cpu U]
//                                         prints "PORT n", then serves
#include <grpcpp/grpcpp.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "empty.pb.h"
#include "messages.pb.h"
#include "test.grpc.pb.h"

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using grpc::ServerWriteReactor;
using grpc::Status;
namespace gt = grpc::testing;

namespace {

int g_read_delay_us = 0;
std::string g_orca;  // the serialized report, or empty

// OrcaLoadReport{cpu_utilization = 1: cpu, rps_fractional = 6: 1000}.
std::string orca_report(double cpu) {
  std::string out;
  auto put = [&out](uint8_t tag, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    out.push_back(static_cast<char>(tag));
    for (int i = 0; i < 8; i++)
      out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  };
  put(0x09, cpu);     // field 1, fixed64
  put(0x31, 1000.0);  // field 6, fixed64
  return out;
}

void add_orca(CallbackServerContext *ctx) {
  if (!g_orca.empty())
    ctx->AddTrailingMetadata("endpoint-load-metrics-bin", g_orca);
}

class Service final : public gt::TestService::CallbackService {
  ServerUnaryReactor *EmptyCall(CallbackServerContext *ctx, const gt::Empty *,
                                gt::Empty *) override {
    auto *r = ctx->DefaultReactor();
    add_orca(ctx);
    r->Finish(Status::OK);
    return r;
  }

  ServerUnaryReactor *UnaryCall(CallbackServerContext *ctx,
                                const gt::SimpleRequest *req,
                                gt::SimpleResponse *resp) override {
    auto *r = ctx->DefaultReactor();
    add_orca(ctx);
    if (req->response_compressed().value())
      ctx->set_compression_algorithm(GRPC_COMPRESS_GZIP);
    if (req->response_size() > 0)
      resp->mutable_payload()->mutable_body()->assign(
          static_cast<size_t>(req->response_size()), '\0');
    if (req->has_response_status() && req->response_status().code() != 0) {
      r->Finish(Status(static_cast<grpc::StatusCode>(req->response_status().code()),
                       req->response_status().message()));
      return r;
    }
    r->Finish(Status::OK);
    return r;
  }

  class Streamer final : public ServerWriteReactor<gt::StreamingOutputCallResponse> {
   public:
    explicit Streamer(const gt::StreamingOutputCallRequest *req) {
      for (const auto &p : req->response_parameters())
        sizes_.push_back(p.size());
      Next();
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(Status(grpc::StatusCode::UNKNOWN, "write failed"));
        return;
      }
      Next();
    }
    void OnDone() override { delete this; }

   private:
    void Next() {
      if (i_ == sizes_.size()) {
        Finish(Status::OK);
        return;
      }
      msg_.mutable_payload()->mutable_body()->assign(
          static_cast<size_t>(sizes_[i_++]), '\0');
      StartWrite(&msg_);
    }
    std::vector<int32_t> sizes_;
    size_t i_ = 0;
    gt::StreamingOutputCallResponse msg_;
  };

  ServerWriteReactor<gt::StreamingOutputCallResponse> *StreamingOutputCall(
      CallbackServerContext *, const gt::StreamingOutputCallRequest *req) override {
    return new Streamer(req);
  }

  class Reader final : public grpc::ServerReadReactor<gt::StreamingInputCallRequest> {
   public:
    explicit Reader(gt::StreamingInputCallResponse *resp) : resp_(resp) {
      StartRead(&msg_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        resp_->set_aggregated_payload_size(static_cast<int32_t>(total_));
        Finish(Status::OK);
        return;
      }
      total_ += msg_.payload().body().size();
      if (g_read_delay_us > 0)
        usleep(static_cast<useconds_t>(g_read_delay_us));
      StartRead(&msg_);
    }
    void OnDone() override { delete this; }

   private:
    gt::StreamingInputCallResponse *resp_;
    gt::StreamingInputCallRequest msg_;
    uint64_t total_ = 0;
  };

  grpc::ServerReadReactor<gt::StreamingInputCallRequest> *StreamingInputCall(
      CallbackServerContext *, gt::StreamingInputCallResponse *resp) override {
    return new Reader(resp);
  }
};

std::unique_ptr<grpc::Server> g_server;

}  // namespace

int main(int argc, char **argv) {
  // Block SIGINT/SIGTERM before gRPC starts its threads; main waits for one.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  std::string host = "127.0.0.1";
  int port = 0;
  int max_recv = 16 << 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--port") && i + 1 < argc)
      port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--host") && i + 1 < argc)
      host = argv[++i];
    else if (!strcmp(argv[i], "--max-recv") && i + 1 < argc)
      max_recv = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--read-delay-us") && i + 1 < argc)
      g_read_delay_us = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--orca-cpu") && i + 1 < argc)
      g_orca = orca_report(atof(argv[++i]));
    else {
      fprintf(stderr, "usage: bench_server [--port N] [--host ADDR] "
                      "[--max-recv BYTES] [--read-delay-us US] "
                      "[--orca-cpu U]\n");
      return 2;
    }
  }
  Service svc;
  grpc::ServerBuilder b;
  int bound = 0;
  b.AddListeningPort(host + ":" + std::to_string(port),
                     grpc::InsecureServerCredentials(), &bound);
  b.RegisterService(&svc);
  b.SetMaxReceiveMessageSize(max_recv);
  b.SetMaxSendMessageSize(16 << 20);
  g_server = b.BuildAndStart();
  if (!g_server || bound == 0) {
    fprintf(stderr, "bench_server: cannot listen on %s:%d\n", host.c_str(), port);
    return 1;
  }
  printf("PORT %d\n", bound);
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  g_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  g_server->Wait();
  return 0;
}
