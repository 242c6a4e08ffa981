// The store's data apart from its connections (daemon/store/store_table.h):
// values, numbers as decimal text, queues, and the bytes counted against
// the clients (prismd's own values apart).
#include <catch2/catch.hpp>

#include <string>

#include "daemon/store/store_table.h"

namespace prism::store {
namespace {

TEST_CASE("store table: prismd's own values do not count against the clients", "[store]") {
  StoreTable t;
  t.Set("a", "xyz");                       // a client's: 1 + 3 bytes
  t.Set("virtual/7", "record", true);      // prismd's: 9 + 6 bytes
  CHECK(t.stored_bytes() == 19);
  CHECK(t.client_bytes() == 4);
  t.Set("virtual/7", "mine");              // a client overwrites it: the clients' now
  CHECK(t.stored_bytes() == 17);
  CHECK(t.client_bytes() == 17);
  CHECK(t.Forget("virtual/7"));
  CHECK_FALSE(t.Forget("virtual/7"));
  CHECK(t.stored_bytes() == 4);
  CHECK(t.StoredSize("a") == 4);
  CHECK(t.StoredSize("b") == 0);
  t.Clear();
  CHECK(t.stored_bytes() == 0);
  CHECK(t.keys() == 0);
}

TEST_CASE("store table: values, numbers and queues", "[store]") {
  StoreTable t;
  CHECK(t.Find("k") == nullptr);
  CHECK(t.ValueOr("k").empty());
  CHECK(t.NumberAt("k") == 0);
  t.Set("k", "41");
  CHECK(t.NumberAt("k") == 41);
  t.Set("k", "not a number");
  CHECK(t.NumberAt("k") == 0);
  CHECK_FALSE(t.AllSet({"k", "q"}));
  t.QueuePush("q", "one");
  t.QueuePush("q", "two");
  CHECK(t.AllSet({"k", "q"}));             // a non-empty queue counts as set
  CHECK(t.QueueLength("q") == 2);
  CHECK(t.stored_bytes() == 1 + 12 + 2 * 1 + 3 + 3);
  const auto [length, front] = t.QueuePop("q");
  CHECK(length == 2);
  REQUIRE(front.has_value());
  CHECK(*front == "one");
  CHECK(t.QueueLength("q") == 1);
  CHECK(t.stored_bytes() == 1 + 12 + 1 + 3);
  t.QueuePop("q");
  CHECK(t.QueuePop("q").second == std::nullopt);
  CHECK_FALSE(t.AllSet({"q"}));
}

}  // namespace
}  // namespace prism::store
