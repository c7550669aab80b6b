// bench_client: the gRPC C++ competitor of bench/run, on Debian's libgrpc++
// async API (one CompletionQueue driven by this thread), with the generic
// stub so both clients send and receive the same raw message bytes.
//
//   bench_client --target HOST:PORT --method /pkg.Svc/M [--req FILE]
//       [--mode unary|stream|hold] [--calls N] [--warmup W]
//       [--concurrency C] [--channels K] [--service-config JSON]
//       [--scenario NAME]
//   bench_client --make-req empty|unary|stream [--size S] [--msgs M]
//       --out FILE [--framed-out FILE]      (request bytes; framed for h2load)
//
// Prints one line:
//   RESULT scenario=.. client=grpc-c++ calls=N ok=N qps=.. p50_us=..
//     p99_us=.. p999_us=.. cpu_s=.. cpu_us_per_call=.. maxrss_kib=..
// In stream mode a "call" in qps/cpu is one response message (msgs=..) and
// the latencies are per stream. Hold mode starts C calls against a server
// that never answers and reports heap bytes per in-flight call (mallinfo2).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "messages.pb.h"

namespace {

uint64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double cpu_s() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

long maxrss_kib() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

struct Opts {
  std::string target, method = "/grpc.testing.TestService/EmptyCall";
  std::string req_file, mode = "unary", service_config, scenario = "-";
  std::string compression;  // --compression gzip|deflate: request encoding
  uint64_t calls = 10000, warmup = 1000, concurrency = 1, channels = 1;
};

enum State { kStart, kWrite, kRead, kFinish, kUnary };

struct Call {
  grpc::ClientContext ctx;
  grpc::ByteBuffer resp;
  grpc::Status st;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> unary;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> stream;
  State state = kUnary;
  uint64_t start = 0;
};

struct Runner {
  Opts o;
  grpc::ByteBuffer req;
  std::vector<std::shared_ptr<grpc::Channel>> chans;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  grpc::CompletionQueue cq;
  uint64_t next_chan = 0;

  // Per phase.
  uint64_t target_calls = 0, started = 0, finished = 0, ok = 0, msgs = 0;
  std::vector<uint64_t> lat;
  bool record = false;

  void start_one() {
    Call *c = new Call;
    c->start = now_us();
    started++;
    grpc::GenericStub *stub = stubs[next_chan++ % stubs.size()].get();
    if (o.mode == "stream") {
      c->state = kStart;
      c->stream = stub->PrepareCall(&c->ctx, o.method, &cq);
      c->stream->StartCall(c);
    } else {
      c->state = kUnary;
      c->unary = stub->PrepareUnaryCall(&c->ctx, o.method, req, &cq);
      c->unary->StartCall();
      c->unary->Finish(&c->resp, &c->st, c);
    }
  }

  void done(Call *c) {
    finished++;
    if (c->st.ok())
      ok++;
    else if (ok == 0 && finished < 5)
      fprintf(stderr, "bench_client: call failed: %d %s\n", c->st.error_code(),
              c->st.error_message().c_str());
    if (record)
      lat.push_back(now_us() - c->start);
    delete c;
    if (started < target_calls)
      start_one();
  }

  void step(Call *c, bool okv) {
    switch (c->state) {
      case kUnary:
        done(c);
        return;
      case kStart:
        if (!okv) {
          c->state = kFinish;
          c->stream->Finish(&c->st, c);
          return;
        }
        c->state = kWrite;
        c->stream->WriteLast(req, grpc::WriteOptions(), c);
        return;
      case kWrite:
        c->state = kRead;
        c->stream->Read(&c->resp, c);
        return;
      case kRead:
        if (okv) {
          msgs++;
          c->stream->Read(&c->resp, c);
          return;
        }
        c->state = kFinish;
        c->stream->Finish(&c->st, c);
        return;
      case kFinish:
        done(c);
        return;
    }
  }

  void phase(uint64_t n, bool rec) {
    target_calls = n;
    started = finished = ok = msgs = 0;
    record = rec;
    lat.clear();
    lat.reserve(n);
    for (uint64_t i = 0; i < o.concurrency && i < n; i++)
      start_one();
    void *tag;
    bool okv;
    while (finished < n && cq.Next(&tag, &okv))
      step(static_cast<Call *>(tag), okv);
  }
};

bool read_file(const std::string &path, std::string *out) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

int make_req(const std::string &kind, int size, int msgs, const std::string &out,
             const std::string &framed) {
  std::string bytes;
  if (kind == "unary" || kind == "unary-gzip") {
    grpc::testing::SimpleRequest r;
    r.set_response_size(size);
    // unary-gzip: bench_server answers in gzip (response_compressed).
    if (kind == "unary-gzip")
      r.mutable_response_compressed()->set_value(true);
    if (size > 0)
      r.mutable_payload()->mutable_body()->assign(static_cast<size_t>(size), '\0');
    r.SerializeToString(&bytes);
  } else if (kind == "stream") {
    grpc::testing::StreamingOutputCallRequest r;
    for (int i = 0; i < msgs; i++)
      r.add_response_parameters()->set_size(size);
    r.SerializeToString(&bytes);
  } else if (kind != "empty") {
    fprintf(stderr, "bench_client: --make-req empty|unary|unary-gzip|stream\n");
    return 2;
  }
  std::ofstream(out, std::ios::binary) << bytes;
  if (!framed.empty()) {
    std::string f(5, '\0');
    uint32_t n = static_cast<uint32_t>(bytes.size());
    f[1] = static_cast<char>(n >> 24);
    f[2] = static_cast<char>(n >> 16);
    f[3] = static_cast<char>(n >> 8);
    f[4] = static_cast<char>(n);
    std::ofstream(framed, std::ios::binary) << f << bytes;
  }
  return 0;
}

uint64_t pct(const std::vector<uint64_t> &v, double p) {
  if (v.empty())
    return 0;
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char **argv) {
  Opts o;
  std::string make, out, framed;
  int size = 0, msgs = 1000;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "bench_client: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--target") o.target = val();
    else if (a == "--method") o.method = val();
    else if (a == "--req") o.req_file = val();
    else if (a == "--mode") o.mode = val();
    else if (a == "--calls") o.calls = std::stoull(val());
    else if (a == "--warmup") o.warmup = std::stoull(val());
    else if (a == "--concurrency") o.concurrency = std::stoull(val());
    else if (a == "--channels") o.channels = std::stoull(val());
    else if (a == "--service-config") o.service_config = val();
    else if (a == "--scenario") o.scenario = val();
    else if (a == "--compression") o.compression = val();
    else if (a == "--make-req") make = val();
    else if (a == "--size") size = std::stoi(val());
    else if (a == "--msgs") msgs = std::stoi(val());
    else if (a == "--out") out = val();
    else if (a == "--framed-out") framed = val();
    else {
      fprintf(stderr, "bench_client: unknown flag %s (see the source header)\n",
              a.c_str());
      return 2;
    }
  }
  if (!make.empty())
    return make_req(make, size, msgs, out, framed);
  if (o.target.empty() || o.concurrency == 0 || o.channels == 0) {
    fprintf(stderr, "bench_client: --target needed\n");
    return 2;
  }

  Runner r;
  r.o = o;
  std::string reqbytes;
  if (!o.req_file.empty() && !read_file(o.req_file, &reqbytes)) {
    fprintf(stderr, "bench_client: cannot read %s\n", o.req_file.c_str());
    return 1;
  }
  grpc::Slice slice(reqbytes);
  r.req = grpc::ByteBuffer(&slice, 1);
  for (uint64_t k = 0; k < o.channels; k++) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("bench.channel_index", static_cast<int>(k)); // no sharing
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    if (!o.service_config.empty())
      args.SetServiceConfigJSON(o.service_config);
    if (o.compression == "gzip")
      args.SetCompressionAlgorithm(GRPC_COMPRESS_GZIP);
    else if (o.compression == "deflate")
      args.SetCompressionAlgorithm(GRPC_COMPRESS_DEFLATE);
    auto ch = grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args);
    r.stubs.push_back(std::make_unique<grpc::GenericStub>(ch));
    r.chans.push_back(ch);
  }

  if (o.mode == "hold") {
    // Heap per in-flight call: o.calls calls against a server that never
    // answers; sample the heap until it stops growing.
    for (auto &ch : r.chans)  // connect first
      ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<Call *> calls;
    size_t base = mallinfo2().uordblks;
    for (uint64_t i = 0; i < o.calls; i++) {
      Call *c = new Call;
      c->unary = r.stubs[i % r.stubs.size()]->PrepareUnaryCall(&c->ctx, o.method, r.req, &r.cq);
      c->unary->StartCall();
      c->unary->Finish(&c->resp, &c->st, c);
      calls.push_back(c);
    }
    size_t last = 0, cur = 0;
    int stable = 0;
    for (int i = 0; i < 100 && stable < 3; i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      cur = mallinfo2().uordblks;
      stable = (cur == last) ? stable + 1 : 0;
      last = cur;
    }
    double per = (double)(cur - base) / (double)o.calls;
    printf("RESULT scenario=%s client=grpc-c++ calls=%" PRIu64
           " heap_bytes=%zu heap_bytes_per_call=%.0f maxrss_kib=%ld\n",
           o.scenario.c_str(), o.calls, cur - base, per, maxrss_kib());
    fflush(stdout);
    for (Call *c : calls)
      c->ctx.TryCancel();
    void *tag;
    bool okv;
    for (size_t n = 0; n < calls.size() && r.cq.Next(&tag, &okv); n++)
      delete static_cast<Call *>(tag);
    r.cq.Shutdown();
    while (r.cq.Next(&tag, &okv)) {
    }
    return 0;
  }

  if (o.warmup)
    r.phase(o.warmup, false);
  double c0 = cpu_s();
  uint64_t t0 = now_us();
  r.phase(o.calls, true);
  uint64_t el = now_us() - t0;
  double cpu = cpu_s() - c0;
  std::sort(r.lat.begin(), r.lat.end());
  uint64_t units = o.mode == "stream" ? r.msgs : r.ok;
  printf("RESULT scenario=%s client=grpc-c++ calls=%" PRIu64 " ok=%" PRIu64
         " msgs=%" PRIu64 " qps=%.0f p50_us=%" PRIu64 " p99_us=%" PRIu64
         " p999_us=%" PRIu64 " cpu_s=%.3f cpu_us_per_call=%.2f maxrss_kib=%ld\n",
         o.scenario.c_str(), o.calls, r.ok, r.msgs,
         units * 1e6 / (double)(el ? el : 1), pct(r.lat, 0.5), pct(r.lat, 0.99),
         pct(r.lat, 0.999), cpu, units ? cpu * 1e6 / (double)units : 0.0,
         maxrss_kib());
  fflush(stdout);
  r.cq.Shutdown();
  void *tag;
  bool okv;
  while (r.cq.Next(&tag, &okv)) {
  }
  return r.ok == o.calls ? 0 : 1;
}
