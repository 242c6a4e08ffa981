// Helper process for the plugin tests: one "rank" that loads the plugin with
// dlopen and runs a scenario against a peer process (started the same way).
//
//   plugin_peer <libnccl-net-prism.so> <scenario> <A|B>
// Protocol with the launcher: prints "HANDLE <hex>" (its listen handle),
// reads "PEER <hex>" (the other process's handle), connects and accepts,
// runs the scenario, closes everything and exits 0 on success. Failures are
// printed to stderr with exit code 1.
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "test/plugin_driver.h"

namespace {

using prism::testing::PatternByte;
using prism::testing::PluginDriver;
using prism::testing::PluginError;

struct Link {
  PluginDriver* drv;
  void* send;
  void* recv;
  bool is_a;
};

void Fill(std::vector<char>& buf, size_t size, int tag, uint64_t seq) {
  for (size_t k = 0; k < size; ++k) buf[k] = static_cast<char>(PatternByte(k, tag, seq));
}

void Verify(const std::vector<char>& buf, size_t size, int tag, uint64_t seq, const char* what) {
  for (size_t k = 0; k < size; ++k) {
    if (static_cast<unsigned char>(buf[k]) != PatternByte(k, tag, seq)) {
      throw PluginError(std::string(what) + ": byte " + std::to_string(k) + " of " +
                        std::to_string(size) + " (tag " + std::to_string(tag) + ") is wrong");
    }
  }
}

void* RegHost(Link& l, void* comm, std::vector<char>& buf) {
  void* mh = nullptr;
  PRISM_DRV_CHECK(l.drv->net().regMr(comm, buf.data(), buf.size(), kPrismPtrHost, &mh));
  return mh;
}

void SendOne(Link& l, std::vector<char>& buf, size_t size, int tag, uint64_t seq) {
  Fill(buf, size, tag, seq);
  void* mh = RegHost(l, l.send, buf);
  int sizes[1] = {-1};
  l.drv->Wait(l.drv->Send(l.send, buf.data(), size, tag, mh), sizes);
  if (sizes[0] != static_cast<int>(size)) throw PluginError("send test() size mismatch");
  PRISM_DRV_CHECK(l.drv->net().deregMr(l.send, mh));
}

void RecvOne(Link& l, std::vector<char>& buf, size_t size, int tag, uint64_t seq) {
  void* mh = RegHost(l, l.recv, buf);
  void* data[1] = {buf.data()};
  size_t max[1] = {buf.size()};
  int tags[1] = {tag};
  void* mhs[1] = {mh};
  int sizes[1] = {-1};
  l.drv->Wait(l.drv->Recv(l.recv, 1, data, max, tags, mhs), sizes);
  if (sizes[0] != static_cast<int>(size)) {
    throw PluginError("received " + std::to_string(sizes[0]) + " bytes, expected " +
                      std::to_string(size));
  }
  Verify(buf, size, tag, seq, "sizes");
  PRISM_DRV_CHECK(l.drv->net().deregMr(l.recv, mh));
}

// A sends every size to B, B checks and echoes, A checks the echo.
void ScenarioSizes(Link& l) {
  const size_t sizes[] = {0, 1, 7, 4096, 65537, (1u << 20) + 3, 16u << 20, 64u << 20};
  std::vector<char> buf(64u << 20);
  int i = 0;
  for (size_t size : sizes) {
    const int tag = 100 + i;
    if (l.is_a) {
      SendOne(l, buf, size, tag, i);
      RecvOne(l, buf, size, tag, i);
    } else {
      RecvOne(l, buf, size, tag, i);
      SendOne(l, buf, size, tag, i);
    }
    ++i;
  }
}

// A sends tags 10, 11, 12 (different sizes); B posts one grouped irecv with
// tags {12, 10, 11} and checks each buffer got the message with its tag.
void ScenarioGrouped(Link& l) {
  const int tags[3] = {10, 11, 12};
  const size_t sizes[3] = {1000, 300000, 5};
  std::vector<std::vector<char>> bufs(3, std::vector<char>(400000));
  if (l.is_a) {
    for (int i = 0; i < 3; ++i) SendOne(l, bufs[i], sizes[i], tags[i], i);
    return;
  }
  const int order[3] = {2, 0, 1};  // slot -> message index
  void* data[3];
  size_t max[3];
  int rtags[3];
  void* mhs[3];
  for (int s = 0; s < 3; ++s) {
    data[s] = bufs[s].data();
    max[s] = bufs[s].size();
    rtags[s] = tags[order[s]];
    mhs[s] = RegHost(l, l.recv, bufs[s]);
  }
  int got[3] = {-1, -1, -1};
  l.drv->Wait(l.drv->Recv(l.recv, 3, data, max, rtags, mhs), got);
  for (int s = 0; s < 3; ++s) {
    const int m = order[s];
    if (got[s] != static_cast<int>(sizes[m])) throw PluginError("grouped: wrong size in slot");
    Verify(bufs[s], sizes[m], tags[m], m, "grouped");
    PRISM_DRV_CHECK(l.drv->net().deregMr(l.recv, mhs[s]));
  }
}

// A sends tag 1 then tag 2; B posts the receive for tag 2 first.
void ScenarioOutOfOrder(Link& l) {
  std::vector<char> b1(5000), b2(7000);
  if (l.is_a) {
    SendOne(l, b1, 5000, 1, 0);
    SendOne(l, b2, 7000, 2, 1);
    return;
  }
  void* mh1 = RegHost(l, l.recv, b1);
  void* mh2 = RegHost(l, l.recv, b2);
  void* d2[1] = {b2.data()};
  size_t m2[1] = {b2.size()};
  int t2[1] = {2};
  void* mhs2[1] = {mh2};
  void* r2 = l.drv->Recv(l.recv, 1, d2, m2, t2, mhs2);
  void* d1[1] = {b1.data()};
  size_t m1[1] = {b1.size()};
  int t1[1] = {1};
  void* mhs1[1] = {mh1};
  void* r1 = l.drv->Recv(l.recv, 1, d1, m1, t1, mhs1);
  int s2[1], s1[1];
  l.drv->Wait(r2, s2);
  l.drv->Wait(r1, s1);
  if (s1[0] != 5000 || s2[0] != 7000) throw PluginError("out of order: wrong sizes");
  Verify(b1, 5000, 1, 0, "out of order tag 1");
  Verify(b2, 7000, 2, 1, "out of order tag 2");
  PRISM_DRV_CHECK(l.drv->net().deregMr(l.recv, mh1));
  PRISM_DRV_CHECK(l.drv->net().deregMr(l.recv, mh2));
}

// NCCL_NET_MAX_REQUESTS: 32 requests in flight per comm, the 33rd gets a
// NULL request (retry) until one completes.
void ScenarioLimits(Link& l) {
  constexpr int kMax = kPrismNetMaxRequests;
  std::vector<std::vector<char>> bufs(kMax + 1, std::vector<char>(1024));
  void* comm = l.is_a ? l.send : l.recv;
  std::vector<void*> mhs;
  for (auto& b : bufs) mhs.push_back(RegHost(l, comm, b));
  std::vector<void*> reqs;
  auto post = [&](int i) -> void* {
    void* req = nullptr;
    if (l.is_a) {
      Fill(bufs[i], 1024, i, i);
      PRISM_DRV_CHECK(l.drv->net().isend(comm, bufs[i].data(), 1024, i, mhs[i], nullptr, &req));
    } else {
      void* d[1] = {bufs[i].data()};
      size_t m[1] = {1024};
      int t[1] = {i};
      void* mh[1] = {mhs[i]};
      PRISM_DRV_CHECK(l.drv->net().irecv(comm, 1, d, m, t, mh, nullptr, &req));
    }
    return req;
  };
  for (int i = 0; i < kMax; ++i) {
    void* req = post(i);
    if (req == nullptr) throw PluginError("request " + std::to_string(i) + " refused below the limit");
    reqs.push_back(req);
  }
  if (post(kMax) != nullptr) throw PluginError("request 33 accepted beyond NCCL_NET_MAX_REQUESTS");
  l.drv->Wait(reqs[0]);
  void* last = post(kMax);
  if (last == nullptr) throw PluginError("request refused after one completed");
  for (int i = 1; i < kMax; ++i) l.drv->Wait(reqs[i]);
  l.drv->Wait(last);
  if (!l.is_a) {
    for (int i = 0; i <= kMax; ++i) Verify(bufs[i], 1024, i, i, "limits");
  }
  for (void* mh : mhs) PRISM_DRV_CHECK(l.drv->net().deregMr(comm, mh));
}

// Many random-size messages both ways on one link, up to 8 in flight; the
// payload depends on `tag`, so data from another link would not verify.
class Stream {
 public:
  static constexpr int kWindow = 8;

  Stream(Link& l, int count, int tag, uint64_t seed) : l_(l), tag_(tag), sizes_(count) {
    uint64_t rng = seed;
    auto next = [&rng] {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      return rng >> 33;
    };
    for (size_t& s : sizes_) s = (next() % 4 == 0) ? next() % (1 << 20) : next() % 3000;
    for (int w = 0; w < kWindow; ++w) {
      sbufs_.emplace_back(1 << 20);
      rbufs_.emplace_back(1 << 20);
      smh_.push_back(RegHost(l, l.send, sbufs_[w]));
      rmh_.push_back(RegHost(l, l.recv, rbufs_[w]));
    }
  }
  ~Stream() {
    for (int w = 0; w < kWindow; ++w) {
      l_.drv->net().deregMr(l_.send, smh_[w]);
      l_.drv->net().deregMr(l_.recv, rmh_[w]);
    }
  }
  int steps() const { return static_cast<int>(sizes_.size()) + kWindow; }

  // Step i: completes message i - kWindow (checking it), posts message i.
  void Step(int i) {
    const int w = i % kWindow;
    const int old = i - kWindow;
    if (old >= 0) {
      int got[8];
      l_.drv->WaitBoth(sreq_[w], rreq_[w], got);
      if (got[0] != static_cast<int>(sizes_[old])) throw PluginError("stream: wrong size");
      Verify(rbufs_[w], sizes_[old], tag_, old, "stream");
    }
    if (i >= static_cast<int>(sizes_.size())) return;
    Fill(sbufs_[w], sizes_[i], tag_, i);
    void* d[1] = {rbufs_[w].data()};
    size_t m[1] = {rbufs_[w].size()};
    int t[1] = {tag_};
    void* mh[1] = {rmh_[w]};
    rreq_[w] = l_.drv->Recv(l_.recv, 1, d, m, t, mh);
    sreq_[w] = l_.drv->Send(l_.send, sbufs_[w].data(), sizes_[i], tag_, smh_[w]);
  }

 private:
  Link& l_;
  int tag_;
  std::vector<size_t> sizes_;
  std::vector<std::vector<char>> sbufs_, rbufs_;
  std::vector<void*> smh_, rmh_;
  void* sreq_[kWindow] = {};
  void* rreq_[kWindow] = {};
};

void ScenarioStream(Link& l) {
  Stream s(l, 600, 7, 12345);
  for (int i = 0; i < s.steps(); ++i) s.Step(i);
}

// Every link streams at once (one driver thread posts and tests them all in
// turn, as NCCL's proxy thread does), each with its own payload pattern.
void ScenarioMulti(std::vector<Link>& links) {
  std::vector<std::unique_ptr<Stream>> streams;
  for (size_t k = 0; k < links.size(); ++k) {
    streams.push_back(std::make_unique<Stream>(links[k], 300, 20 + static_cast<int>(k), 777 + k));
  }
  for (int i = 0; i < streams[0]->steps(); ++i) {
    for (auto& s : streams) s->Step(i);
  }
}

// Two connections through the same NIC: link 0 posts a window of eight
// 512 KiB messages, then link 1 one of 4 KiB. Every request is tested in
// turn, link 0's first, until all are done. PRISM_TEST_EXPECT_AHEAD_MAX and
// _MIN bound how many of link 0's sends had completed when link 1's did (the
// NIC's order, PRISM_LINK_ORDER: all 8 as posted, the last of which ends
// only 4 KiB's wire time before link 1's; round-robin none in slices, and
// in whole-message turns at most the one already on the wire when link 1's
// came).
void ScenarioTurns(std::vector<Link>& links) {
  constexpr int kWindow = 8;
  constexpr size_t kBig = 512 << 10, kSmall = 4096;
  struct Message {
    Link* link;
    size_t size;
    int tag;
    uint64_t seq;
    std::vector<char> out, in;
    void *out_mh = nullptr, *in_mh = nullptr, *send = nullptr, *recv = nullptr;
    int sent = 0, received = 0;
  };
  std::vector<Message> msgs(kWindow + 1);
  for (int i = 0; i <= kWindow; ++i) {
    Message& m = msgs[i];
    const bool big = i < kWindow;
    m = Message{big ? &links[0] : &links[1], big ? kBig : kSmall, big ? 40 : 41, big ? uint64_t(i) : 0};
    m.out.resize(m.size);
    m.in.resize(m.size);
    Fill(m.out, m.size, m.tag, m.seq);
    m.out_mh = RegHost(*m.link, m.link->send, m.out);
    m.in_mh = RegHost(*m.link, m.link->recv, m.in);
    void* d[1] = {m.in.data()};
    size_t max[1] = {m.size};
    int t[1] = {m.tag};
    void* mh[1] = {m.in_mh};
    m.recv = m.link->drv->Recv(m.link->recv, 1, d, max, t, mh);
  }
  // Every payload is ready: the sends go out back to back.
  for (Message& m : msgs) m.send = m.link->drv->Send(m.link->send, m.out.data(), m.size, m.tag, m.out_mh);
  auto& net = links[0].drv->net();
  int ahead = -1;
  const int64_t deadline = prism::testing::NowNs() + 60'000'000'000;
  for (bool all = false; !all;) {
    all = true;
    for (Message& m : msgs) {
      int sizes[8];
      if (!m.sent) PRISM_DRV_CHECK(net.test(m.send, &m.sent, sizes));
      if (!m.received) PRISM_DRV_CHECK(net.test(m.recv, &m.received, sizes));
      all = all && m.sent && m.received;
    }
    if (ahead < 0 && msgs[kWindow].sent) {
      ahead = 0;
      for (int i = 0; i < kWindow; ++i) ahead += msgs[i].sent;
    }
    if (prism::testing::NowNs() > deadline) throw PluginError("turns: requests timed out");
  }
  for (Message& m : msgs) {
    Verify(m.in, m.size, m.tag, m.seq, "turns");
    PRISM_DRV_CHECK(net.deregMr(m.link->send, m.out_mh));
    PRISM_DRV_CHECK(net.deregMr(m.link->recv, m.in_mh));
  }
  const char* at_most = std::getenv("PRISM_TEST_EXPECT_AHEAD_MAX");
  const char* at_least = std::getenv("PRISM_TEST_EXPECT_AHEAD_MIN");
  if ((at_most != nullptr && ahead > std::atoi(at_most)) || (at_least != nullptr && ahead < std::atoi(at_least))) {
    throw PluginError("link 1's send completed after " + std::to_string(ahead) + " of link 0's " +
                      std::to_string(kWindow) + ", expected at most " + (at_most ? at_most : "-") +
                      ", at least " + (at_least ? at_least : "-"));
  }
}

int ThreadCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: plugin_peer <plugin.so> <scenario> <A|B>\n";
    return 2;
  }
  const std::string scenario = argv[2];
  const bool is_a = std::string(argv[3]) == "A";
  try {
    PluginDriver drv(argv[1]);
    void* ctx = drv.Init();
    std::vector<char> handle;
    void* lc = drv.Listen(ctx, &handle);
    std::cout << "HANDLE " << prism::testing::HexEncode(handle) << std::endl;
    std::string word, hex;
    if (!(std::cin >> word >> hex) || word != "PEER") throw PluginError("no PEER line on stdin");
    // "multi": kMultiPairs connections each way in one context (several
    // comms per progress thread pool); "turns" two; the others use one.
    constexpr int kMultiPairs = 5;
    const int pairs = scenario == "multi" ? kMultiPairs : scenario == "turns" ? 2 : 1;
    const int threads_before = ThreadCount();
    std::vector<void*> sends(pairs), recvs(pairs);
    for (int k = 0; k < pairs; ++k) {
      drv.ConnectAccept(ctx, prism::testing::HexDecode(hex), lc, &sends[k], &recvs[k]);
    }
    PRISM_DRV_CHECK(drv.net().closeListen(lc));
    // PRISM_TEST_EXPECT_THREADS: how many progress threads the comms must have started.
    if (const char* want = std::getenv("PRISM_TEST_EXPECT_THREADS")) {
      const int started = ThreadCount() - threads_before;
      if (started != std::atoi(want)) {
        throw PluginError(std::to_string(2 * pairs) + " comms started " +
                          std::to_string(started) + " progress threads, expected " + want);
      }
    }
    Link l{&drv, sends[0], recvs[0], is_a};
    if (scenario == "sizes") {
      ScenarioSizes(l);
    } else if (scenario == "grouped") {
      ScenarioGrouped(l);
    } else if (scenario == "out_of_order") {
      ScenarioOutOfOrder(l);
    } else if (scenario == "limits") {
      ScenarioLimits(l);
    } else if (scenario == "stream") {
      ScenarioStream(l);
    } else if (scenario == "multi") {
      prism::testing::OrderRecvsByPeerIndex(drv, sends, &recvs);
      std::vector<Link> links;
      for (int k = 0; k < pairs; ++k) links.push_back(Link{&drv, sends[k], recvs[k], is_a});
      ScenarioMulti(links);
    } else if (scenario == "turns") {
      prism::testing::OrderRecvsByPeerIndex(drv, sends, &recvs);
      std::vector<Link> links;
      for (int k = 0; k < pairs; ++k) links.push_back(Link{&drv, sends[k], recvs[k], is_a});
      ScenarioTurns(links);
    } else {
      throw PluginError("unknown scenario " + scenario);
    }
    for (int k = 0; k < pairs; ++k) {
      PRISM_DRV_CHECK(drv.net().closeSend(sends[k]));
      PRISM_DRV_CHECK(drv.net().closeRecv(recvs[k]));
    }
    PRISM_DRV_CHECK(drv.net().finalize(ctx));
    std::cout << "OK" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "plugin_peer " << argv[3] << " " << scenario << ": " << e.what() << std::endl;
    return 1;
  }
}
