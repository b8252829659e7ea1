#include "service/store_readers.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <stdexcept>
#include <utility>

namespace fairlane::service {
namespace {

std::vector<Store*> all(const std::vector<std::unique_ptr<Store>>& stores) {
  if (stores.empty()) throw std::invalid_argument("StoreReaders needs at least one store");
  std::vector<Store*> out;
  out.reserve(stores.size());
  for (const auto& store : stores) out.push_back(store.get());
  return out;
}

// On a reader's thread; `readers` and `task` live in the awaiting caller's frame.
boost::asio::awaitable<void> read_there(StoreReaders& readers,
                                        const std::function<void(Store&)>& task) {
  readers.read(task);
  co_return;
}

}  // namespace

boost::asio::awaitable<void> read_on(StoreReaders& readers,
                                     const std::function<void(Store&)>& task) {
  co_await boost::asio::co_spawn(readers.executor(), read_there(readers, task),
                                 boost::asio::use_awaitable);
}

StoreReaders::StoreReaders(std::vector<std::unique_ptr<Store>> stores)
    : stores_(std::move(stores)), free_(all(stores_)), threads_(stores_.size()) {}

StoreReaders::~StoreReaders() {
  threads_.join();
}

void StoreReaders::read(const std::function<void(Store&)>& task) {
  Store* store = nullptr;
  {
    const std::lock_guard lock(mutex_);
    // As many threads as connections: a read on one of them always finds one free.
    if (free_.empty()) throw std::logic_error("StoreReaders::read off its threads");
    store = free_.back();
    free_.pop_back();
  }
  struct Give {
    StoreReaders& readers;
    Store* store;
    ~Give() {
      const std::lock_guard lock(readers.mutex_);
      readers.free_.push_back(store);
    }
  } give{*this, store};
  task(*store);
}

}  // namespace fairlane::service
