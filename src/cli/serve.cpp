#include "cli/serve.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <boost/asio.hpp>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "cli/serve_config.hpp"
#include "fairlane/provider/curl_provider.hpp"
#include "fairlane/store/cluster.hpp"
#include "fairlane/store/dispatch_lock.hpp"
#include "fairlane/store/store.hpp"
#include "service/dispatcher.hpp"
#include "service/http_server.hpp"
#include "service/leadership.hpp"
#include "service/retention.hpp"
#include "service/router.hpp"
#include "service/store_readers.hpp"
#include "store/pg_notifications.hpp"

namespace fairlane::cli {
namespace {

int fail(const std::string& message) {
  std::cerr << "fairlane: " << message << '\n';
  return kExitFailure;
}

// Everything a running service holds, in the order it is made: each piece is given
// references to pieces above it, and they are destroyed in the reverse order.
struct Service {
  explicit Service(const ServeOptions& o) : options(o) {
    store_options.usd_per_million_tokens = o.price_per_mtok;
  }

  const ServeOptions& options;
  fairlane::StoreOptions store_options;
  boost::asio::io_context io;
  // A SQLite file's: held for as long as the store is open (DispatchLock).
  fairlane::DispatchLock lock;
  std::unique_ptr<fairlane::Store> store;
  // The store's, when several instances share it (PostgreSQL): a cluster, in which the
  // lease decides who dispatches (Leadership). nullptr: a single node, which dispatches
  // from the start.
  fairlane::ClusterStore* cluster = nullptr;
  std::unique_ptr<fairlane::Provider> provider;
  std::optional<fairlane::service::Dispatcher> dispatcher;
  fairlane::service::Membership membership;
  std::unique_ptr<fairlane::service::StoreReaders> readers;
  std::optional<fairlane::service::Retention> retention;
  std::optional<fairlane::service::Router> router;
  std::optional<fairlane::service::Leadership> leadership;
  std::unique_ptr<fairlane::store::PgNotifications> notifications;
  std::optional<fairlane::service::HttpServer> server;
  boost::asio::steady_timer promises_timer{io};
  boost::asio::steady_timer answers_deadline{io};
  int exit_status = kExitOk;
};

// `count` more connections to --db's database.
fairlane::Result<std::vector<std::unique_ptr<fairlane::Store>>> open_more(const Service& s,
                                                                          std::int64_t count) {
  std::vector<std::unique_ptr<fairlane::Store>> stores;
  for (std::int64_t i = 0; i < count; ++i) {
    auto store = fairlane::Store::open(s.options.db, s.store_options);
    if (!store.ok()) return store.status();
    stores.push_back(std::move(store).value());
  }
  return stores;
}

// A thousand connections need a thousand descriptors: the soft limit raised to the hard. A
// hard limit below what the flags ask for is said at start (the calls out and the stores'
// files need theirs too): past it, connections wait unaccepted.
void raise_file_limit(const ServeOptions& o) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_NOFILE, &files);
  }
  constexpr std::int64_t kOwnFiles = 64;  // the stores, the readers' pipes, the log, ...
  const std::int64_t wanted = o.max_connections + o.max_in_flight + kOwnFiles;
  if (files.rlim_cur != RLIM_INFINITY && static_cast<std::int64_t>(files.rlim_cur) < wanted) {
    std::cerr << fmt::format(
        "fairlane: the open-file limit is {}, below the {} that --max-connections ({}) and "
        "--max-in-flight ({}) may need: raise it (ulimit -n, LimitNOFILE=) or lower them; "
        "past it, connections wait unaccepted\n",
        files.rlim_cur, wanted, o.max_connections, o.max_in_flight);
  }
}

// The store, the provider client and the dispatcher, which a single node starts at once.
fairlane::Status open_dispatch(Service& s, fairlane::Dialect dialect) {
  // Before the store is opened: a second serve on a SQLite file requeues nothing.
  auto lock = fairlane::DispatchLock::take(s.options.db);
  if (!lock.ok()) return lock.status();
  s.lock = std::move(lock).value();
  auto store = fairlane::Store::open(s.options.db, s.store_options);
  if (!store.ok()) return store.status();
  s.store = std::move(store).value();
  s.cluster = s.store->cluster();
  auto provider = fairlane::make_curl_provider(s.io, provider_config(s.options, dialect));
  if (!provider.ok()) return provider.status();
  s.provider = std::move(provider).value();
  // A server database's commits take milliseconds: they go on a connection and a thread of
  // their own, off the io thread (Dispatcher, CommitThread). So do the reads of a page's
  // text for its call, on a third.
  auto side = open_more(s, s.cluster != nullptr ? 2 : 0);
  if (!side.ok()) return side.status();
  std::vector<std::unique_ptr<fairlane::Store>>& stores = side.value();
  s.dispatcher.emplace(s.io, *s.store, *s.provider, dispatcher_config(s.options),
                       stores.empty() ? nullptr : std::move(stores[0]),
                       stores.empty() ? nullptr : std::move(stores[1]));
  s.membership = {instance_id(s.options), {}, s.cluster == nullptr, 0};
  if (s.cluster != nullptr) return {};
  s.membership.leader = s.membership.instance;
  return s.dispatcher->start();
}

// The routes, with retention (whose counts /metrics shows) and, on a server database, the
// readers: --db-readers connections of their own, on which job views, lists, results and
// live events are read, and uploads committed, off the io thread. None on SQLite, whose
// reads take microseconds: the routes read in place there.
fairlane::Status open_api(Service& s, fairlane::service::RouterConfig config) {
  if (s.cluster != nullptr && s.options.db_readers > 0) {
    auto stores = open_more(s, s.options.db_readers);
    if (!stores.ok()) return stores.status();
    s.readers = std::make_unique<fairlane::service::StoreReaders>(std::move(stores).value());
  }
  s.retention.emplace(s.io, *s.store, s.membership, retention_config(s.options), s.readers.get());
  // A key costs a round trip on a server database: a key found is taken as its user's for a
  // few seconds (a changed weight shows within them; keys are never taken back).
  if (s.cluster != nullptr) config.key_memory = std::chrono::seconds(5);
  config.membership = &s.membership;
  config.readers = s.readers.get();
  config.retention = &*s.retention;
  s.router.emplace(*s.store, *s.dispatcher, std::move(config));
  return {};
}

// A cluster's lease, which decides whether this instance dispatches, and the notifications
// of what other instances accept and change. Listening begins before the lanes are read:
// nothing accepted elsewhere in between is missed.
fairlane::Status join_cluster(Service& s) {
  s.leadership.emplace(
      s.io, *s.store, *s.dispatcher, *s.router, s.membership,
      fairlane::service::LeadershipConfig{s.membership.instance,
                                          std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::duration<double>(s.options.lease_s))});
  auto listening = fairlane::store::PgNotifications::open(
      s.io, s.options.db,
      {std::string(fairlane::kJobEnqueuedChannel), std::string(fairlane::kJobChangedChannel)},
      [&s](std::string_view channel, std::string_view payload) {
        s.leadership->notified(channel, payload);
      },
      [&s] { s.leadership->resync(); });
  if (!listening.ok()) return listening.status();
  s.notifications = std::move(listening).value();
  return s.leadership->start();
}

// Once a second the running jobs' promises are projected again (Router::tick), by the
// leader: a follower's view is only a view.
void keep_promises(Service& s) {
  s.promises_timer.expires_after(std::chrono::seconds(1));
  s.promises_timer.async_wait([&s](const boost::system::error_code& error) {
    if (error) return;
    if (s.membership.leading) s.router->tick();
    keep_promises(s);
  });
}

// After SIGINT or SIGTERM: no new work; the calls in flight may finish, within
// --stop-deadline, and then the io_context stops.
void stop(Service& s) {
  std::cerr << "fairlane: stopping: no new work; calls in flight may finish\n";
  s.server->stop();
  s.promises_timer.cancel();
  s.retention->stop();
  const auto deadline = fairlane::from_seconds(s.options.stop_deadline);
  s.dispatcher->stop(deadline, [&s, deadline](const fairlane::Status& status) {
    if (!status.ok()) {
      std::cerr << "fairlane: " << status.message() << '\n';
      s.exit_status = kExitFailure;
    }
    // Once what was out is stored: a follower may lead at once.
    if (s.leadership) s.leadership->stop();
    s.notifications.reset();
    // Once every upload past the door has its answer (a 202 held for its promise window,
    // a commit out on a reader): none is committed and left unanswered. But not forever:
    // an answer still owed --stop-deadline later (a commit that never returns) is given up.
    s.server->when_answered([&s] { s.io.stop(); });
    s.answers_deadline.expires_after(deadline);
    s.answers_deadline.async_wait([&s](const boost::system::error_code& cancelled) {
      if (!cancelled) s.io.stop();
    });
  });
}

}  // namespace

int serve(const ServeOptions& o) {
  const auto listen = listen_address(o.listen);
  if (!listen.ok()) {
    std::cerr << "fairlane: " << listen.status().message() << '\n';
    return kExitUsage;
  }
  const auto dialect = fairlane::dialect_from(o.provider_dialect);
  if (!dialect) {
    std::cerr << "fairlane: --provider-dialect is openai or anthropic, not '" << o.provider_dialect
              << "'\n";
    return kExitUsage;
  }
  // Before the store is opened (and migrated), as a flag's error.
  if (!o.provider_url.empty()) {
    if (const auto url = fairlane::provider_base_url(o.provider_url); !url.ok()) {
      std::cerr << "fairlane: " << url.status().message() << '\n';
      return kExitUsage;
    }
  }
  raise_file_limit(o);
  // Before any thread starts: it reads the admin key's variable.
  auto routes = router_config(o, *dialect);

  Service s(o);
  if (const auto opened = open_dispatch(s, *dialect); !opened.ok()) return fail(opened.message());
  if (const auto opened = open_api(s, std::move(routes)); !opened.ok()) {
    return fail(opened.message());
  }
  if (s.cluster != nullptr) {
    if (const auto joined = join_cluster(s); !joined.ok()) return fail(joined.message());
  }
  s.server.emplace(s.io, *s.router, http_limits(o));
  auto bound = s.server->listen(listen->address, listen->port);
  if (!bound.ok()) return fail(bound.status().message());

  keep_promises(s);
  s.retention->start();
  boost::asio::signal_set signals(s.io, SIGINT, SIGTERM);
  signals.async_wait([&s](const boost::system::error_code& error, int) {
    if (!error) stop(s);
  });
  std::cout << "listening on http://" << listen->url_host() << ':' << bound.value() << std::endl;
  s.io.run();
  return s.exit_status;
}

}  // namespace fairlane::cli
