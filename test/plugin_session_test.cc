// The daemon side of plugin sessions (daemon/session): broker and the
// default link-model schedule source, without sockets.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "daemon/session/link_schedule_source.h"
#include "daemon/session/session_service.h"
#include "proto/prism_service.grpc.pb.h"

using prism::daemon::LinkModelScheduleSource;
using prism::daemon::PluginSessionService;

namespace {

// `service` served on a unix socket of this test, with a client stub.
struct Served {
  Served(PluginSessionService& service, const std::string& name)
      : path("/tmp/prism-" + name + "-test-" + std::to_string(getpid()) + ".sock") {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
    builder.RegisterService(service.service());
    server = builder.BuildAndStart();
    stub = prism::rpc::PluginSession::NewStub(grpc::CreateChannel("unix://" + path, grpc::InsecureChannelCredentials()));
  }
  ~Served() {
    if (server) server->Shutdown();
    unlink(path.c_str());
  }
  std::string path;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<prism::rpc::PluginSession::Stub> stub;
};

}  // namespace

TEST_CASE("session service: minted handles are unique virtual handles", "[plugin][session]") {
  PluginSessionService service({}, nullptr);
  prism::daemon::VirtualLinkInfo link;
  link.virtual_rank = 17;
  auto a = service.MintReceiveHandle(link);
  auto b = service.MintReceiveHandle(link);
  CHECK(a.magic == prism::kVirtualHandleMagic);
  CHECK(a.conn_id != b.conn_id);
  CHECK(a.virtual_rank == 17);
  REQUIRE(service.LinkOf(a.conn_id).has_value());
  CHECK(service.LinkOf(a.conn_id)->virtual_rank == 17);
  CHECK(service.connected_sessions() == 0);
}

TEST_CASE("session service: a handle for a virtual receiver on the real sender's node carries the node's link",
          "[plugin][session]") {
  PluginSessionService::Options o;
  o.same_node = prism::daemon::SameNodeLink{8, prism::BitsPerSecond(3'600'000'000'000ull), prism::Nanoseconds(1'000)};
  PluginSessionService service(o, nullptr);
  prism::daemon::VirtualLinkInfo link;
  link.real_rank = 5;
  link.virtual_rank = 4;  // node 0, as rank 5
  const prism::VirtualHandle same = service.MintReceiveHandle(link);
  CHECK(same.OnSenderNode());
  CHECK(same.same_node_bits_per_second == 3'600'000'000'000ull);
  CHECK(same.same_node_latency_ns == 1'000);
  link.virtual_rank = 13;  // node 1
  const prism::VirtualHandle other = service.MintReceiveHandle(link);
  CHECK_FALSE(other.OnSenderNode());
  CHECK(other.same_node_bits_per_second == 0);
  // One GPU per node: every peer is on another node.
  o.same_node.gpus_per_node = 1;
  PluginSessionService single(o, nullptr);
  link.virtual_rank = 4;
  CHECK_FALSE(single.MintReceiveHandle(link).OnSenderNode());
}

TEST_CASE("session service: unknown listen id is FailedPrecondition", "[plugin][session]") {
  PluginSessionService service({}, nullptr);
  prism::RealListenHandle h;
  h.listen_id = 99;
  CHECK(absl::IsFailedPrecondition(service.ConnectToRealListener(h, {})));
  h.magic = 1;
  CHECK(absl::IsInvalidArgument(service.ConnectToRealListener(h, {})));
}

TEST_CASE("link schedule source keeps a window ahead of posted receives", "[plugin][session]") {
  LinkModelScheduleSource source(prism::BitsPerSecond(8'000'000'000ull), prism::FromMicroseconds(20), 4);
  prism::rpc::EventBatch batch;
  auto* open = batch.add_events()->mutable_conn_opened();
  open->set_conn_id(7);
  open->set_is_send(false);
  auto* send_open = batch.add_events()->mutable_conn_opened();
  send_open->set_conn_id(8);
  send_open->set_is_send(true);
  prism::rpc::ScheduleBatch out;
  source.OnEvents(1, batch, &out);
  REQUIRE(out.receives_size() == 4);  // seqs 0..3 for the receive connection only
  for (int i = 0; i < out.receives_size(); ++i) {
    CHECK(out.receives(i).conn_id() == 7);
    CHECK(out.receives(i).seq() == static_cast<uint64_t>(i));
    CHECK(out.receives(i).link_bits_per_second() == 8'000'000'000ull);
    CHECK(out.receives(i).link_latency_ns() == 20'000);
  }
  prism::rpc::EventBatch posted;
  auto* p = posted.add_events()->mutable_posted();
  p->set_conn_id(7);
  p->set_seq(2);
  out.Clear();
  source.OnEvents(1, posted, &out);
  REQUIRE(out.receives_size() == 3);  // now up to seq 2 + 4
  CHECK(out.receives(0).seq() == 4);
  CHECK(out.receives(2).seq() == 6);
  posted.mutable_events(0)->mutable_posted()->set_conn_id(8);  // a send conn: nothing
  out.Clear();
  source.OnEvents(1, posted, &out);
  CHECK(out.receives_size() == 0);
}

TEST_CASE("session service: a stream that never sends Hello is cancelled, not held for ever", "[plugin][session]") {
  PluginSessionService::Options options;
  options.hello_timeout = std::chrono::milliseconds(100);
  PluginSessionService service(options, nullptr);
  Served served(service, "hello");
  REQUIRE(served.server);
  auto& stub = served.stub;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));  // the test's own bound
  auto stream = stub->Session(&ctx);
  prism::rpc::DaemonMessage msg;
  CHECK_FALSE(stream->Read(&msg));  // ends when prismd cancels it (before: at the 30 s deadline)
  const grpc::Status status = stream->Finish();
  CHECK(status.error_code() == grpc::StatusCode::CANCELLED);
  CHECK(service.connected_sessions() == 0);
}

TEST_CASE("session service: FailAll tells every open session why prismd ends it", "[plugin][session]") {
  PluginSessionService service({}, nullptr);
  Served served(service, "failall");
  REQUIRE(served.server);
  auto& stub = served.stub;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));  // the test's own bound
  auto stream = stub->Session(&ctx);
  prism::rpc::PluginMessage hello;
  hello.mutable_hello()->set_protocol_version(prism::daemon::kSessionProtocolVersion);
  hello.mutable_hello()->set_rank(3);
  REQUIRE(stream->Write(hello));
  prism::rpc::DaemonMessage msg;
  REQUIRE(stream->Read(&msg));
  CHECK(msg.has_welcome());
  service.FailAll("prismd stopped the run: the run diverged from the graph: x");
  bool got_error = false;
  while (!got_error && stream->Read(&msg)) got_error = msg.has_error();  // keep-alives may come first
  REQUIRE(got_error);
  CHECK(msg.error().message() == "prismd stopped the run: the run diverged from the graph: x");
  ctx.TryCancel();
  stream->Finish();
}
