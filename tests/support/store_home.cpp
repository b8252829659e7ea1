#include "support/store_home.hpp"

#include <optional>
#include <string>

#include "store/pg_store.hpp"
#include "support/store.hpp"

namespace fairlane::testing {
namespace {

class SqliteMemoryHome final : public StoreHome {
 public:
  std::unique_ptr<Store> open(StoreOptions options) override {
    return open_store(":memory:", std::move(options));
  }
};

class SqliteFileHome final : public StoreHome {
 public:
  std::unique_ptr<Store> open(StoreOptions options) override {
    return open_store(dir_.file("store.db"), std::move(options));
  }

 private:
  TempDir dir_;
};

class PgHome final : public StoreHome {
 public:
  explicit PgHome(const std::string& server) : database_(server) {}
  std::unique_ptr<Store> open(StoreOptions options) override {
    auto opened = store::PgStore::open(database_.uri(), std::move(options));
    REQUIRE_MESSAGE(opened.ok(), opened.status().message());
    return std::move(opened).value();
  }

 private:
  PgTestDatabase database_;
};

}  // namespace

std::unique_ptr<StoreHome> StoreHome::sqlite_memory() {
  return std::make_unique<SqliteMemoryHome>();
}

std::unique_ptr<StoreHome> StoreHome::sqlite_file() {
  return std::make_unique<SqliteFileHome>();
}

std::unique_ptr<StoreHome> StoreHome::postgresql() {
  const auto server = pg_server_uri();
  if (!server) return nullptr;
  return std::make_unique<PgHome>(*server);
}

}  // namespace fairlane::testing
