#include "cli/serve.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <boost/asio.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "cli/commands.hpp"
#include "fairlane/provider/curl_provider.hpp"
#include "fairlane/store/cluster.hpp"
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

// 32 hex digits are 128 bits.
constexpr std::size_t kMinAdminKeyChars = 32;

int fail(const std::string& message) {
  std::cerr << "fairlane: " << message << '\n';
  return kExitFailure;
}

// --instance, or the host's name and this process's id: unique among the instances of a
// cluster, and new at every start (a restarted leader is a new instance).
std::string instance_id(const ServeOptions& o) {
  if (!o.instance.empty()) return o.instance;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return fmt::format("{}-{}", host.data()[0] != '\0' ? host.data() : "fairlane", getpid());
}

// `count` more connections to --db's database.
fairlane::Result<std::vector<std::unique_ptr<fairlane::Store>>> open_more(
    const ServeOptions& o, const fairlane::StoreOptions& options, std::int64_t count) {
  std::vector<std::unique_ptr<fairlane::Store>> stores;
  for (std::int64_t i = 0; i < count; ++i) {
    auto store = fairlane::Store::open(o.db, options);
    if (!store.ok()) return store.status();
    stores.push_back(std::move(store).value());
  }
  return stores;
}

// A server database's readers (StoreReaders): --db-readers connections of their own, on
// which job views, lists, results and live events are read, and uploads committed, off the
// io thread. None on SQLite, whose reads take microseconds: the routes read in place there.
fairlane::Result<std::unique_ptr<fairlane::service::StoreReaders>> open_readers(
    const ServeOptions& o, const fairlane::StoreOptions& options, bool server_database) {
  if (!server_database || o.db_readers == 0) {
    return std::unique_ptr<fairlane::service::StoreReaders>();
  }
  auto stores = open_more(o, options, o.db_readers);
  if (!stores.ok()) return stores.status();
  return std::make_unique<fairlane::service::StoreReaders>(std::move(stores).value());
}

// The port of --listen's ADDRESS:PORT, or nothing when it names none.
std::optional<std::uint16_t> listen_port(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  int port = -1;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (port < 0 || port > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(port);
}

// A thousand connections need a thousand descriptors: the soft limit raised to the hard.
void raise_file_limit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

// The admin key from --admin-key-env's variable ("" when unset), warning when it is short.
std::string admin_key_of(const ServeOptions& o) {
  std::string admin_key;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
  if (const char* key = std::getenv(o.admin_key_env.c_str()); key != nullptr) admin_key = key;
  if (!admin_key.empty() && admin_key.size() < kMinAdminKeyChars) {
    // Not refused (tests and labs use short ones), but said at every start. Never the key.
    std::cerr << "fairlane: warning: the admin key in " << o.admin_key_env << " has "
              << admin_key.size() << " characters; use at least " << kMinAdminKeyChars
              << " random ones, such as $(openssl rand -hex 24)\n";
  }
  return admin_key;
}

fairlane::CurlProviderConfig provider_config(const ServeOptions& o, fairlane::Dialect dialect) {
  fairlane::CurlProviderConfig client;
  client.base_url = o.provider_url;
  client.dialect = dialect;
  client.api_key_env = o.api_key_env;
  client.max_connections = static_cast<std::size_t>(std::max<std::int64_t>(o.max_in_flight, 1));
  client.call_timeout = fairlane::from_seconds(o.call_timeout);
  return client;
}

fairlane::service::DispatcherConfig dispatcher_config(const ServeOptions& o) {
  fairlane::service::DispatcherConfig config;
  // 250 ms of the token refill kept unspent: the provider's bucket counts from our calls'
  // arrivals, ours from their sending (BudgetLimits::token_headroom).
  config.limits = {o.rpm, o.tpm, o.max_in_flight, o.tpm / 240};
  config.prompt = o.prompt;
  config.model = o.model;
  config.max_attempts = o.max_attempts;
  config.call_timeout = fairlane::from_seconds(o.call_timeout);
  config.backoff_base = fairlane::from_seconds(o.backoff_base);
  config.backoff_max = fairlane::from_seconds(o.backoff_max);
  config.door.max_wait_s = o.max_wait;
  config.door.max_job_s = o.max_job_seconds;
  config.door.max_queued_pages_per_user = o.max_queued_pages_per_user;
  config.order.keep_promises = o.order == "promises";
  return config;
}

fairlane::service::RetentionConfig retention_config(const ServeOptions& o) {
  fairlane::service::RetentionConfig config;
  config.retain = std::chrono::seconds(static_cast<std::int64_t>(std::llround(o.retain)));
  return config;
}

// What the HTTP server holds a request to, the reader of uploaded PDFs included.
fairlane::service::HttpLimits http_limits(const ServeOptions& o) {
  fairlane::service::HttpLimits limits;
  limits.max_body_bytes = static_cast<std::size_t>(o.max_body_mb) * 1024 * 1024;
  limits.max_header_bytes = static_cast<std::size_t>(o.max_header_kb) * 1024;
  limits.max_connections = static_cast<std::size_t>(o.max_connections);
  limits.read_timeout = std::chrono::seconds(static_cast<std::int64_t>(std::ceil(o.read_timeout)));
  limits.heartbeat = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(o.heartbeat));
  // Uploaded PDFs are read by this same binary, `fairlane read-pdf`, in a child process
  // under limits of CPU, memory and time (include/fairlane/pdf_reader.hpp says why).
  const auto pdf_seconds = static_cast<std::int64_t>(std::ceil(o.pdf_timeout));
  // The reader owns the limits on what a PDF may hold: it stops reading past them, and the
  // parent reads no more of its answer than they allow.
  PdfReading& reading = limits.documents.reader.reading;
  reading.input = page_input_from(o.page_input).value();  // CLI11 checked it
  reading.render.dpi = o.render_dpi;
  reading.max_pages = o.max_pages;
  reading.max_page_bytes = o.max_page_kb * 1024;
  limits.documents.reader.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(o.pdf_timeout));
  limits.documents.reader.command = {"/proc/self/exe",
                                     "read-pdf",
                                     "--cpu-seconds",
                                     std::to_string(pdf_seconds),
                                     "--memory-mb",
                                     std::to_string(o.pdf_memory_mb),
                                     "--max-pages",
                                     std::to_string(o.max_pages),
                                     "--max-page-bytes",
                                     std::to_string(o.max_page_kb * 1024),
                                     "--max-image-bytes",
                                     std::to_string(reading.max_image_bytes),
                                     "--page-input",
                                     o.page_input,
                                     "--dpi",
                                     fmt::format("{}", o.render_dpi)};
  return limits;
}

}  // namespace

int serve(const ServeOptions& o) {
  const auto port = listen_port(o.listen);
  if (!port) {
    std::cerr << "fairlane: --listen takes ADDRESS:PORT, such as 127.0.0.1:8080, not '" << o.listen
              << "'\n";
    return kExitUsage;
  }
  const std::string address = o.listen.substr(0, o.listen.rfind(':'));
  const auto dialect = fairlane::dialect_from(o.provider_dialect);
  if (!dialect) {
    std::cerr << "fairlane: --provider-dialect is openai or anthropic, not '" << o.provider_dialect
              << "'\n";
    return kExitUsage;
  }
  raise_file_limit();

  boost::asio::io_context io;
  fairlane::StoreOptions store_options;
  store_options.usd_per_million_tokens = o.price_per_mtok;
  auto store = fairlane::Store::open(o.db, store_options);
  if (!store.ok()) return fail(store.status().message());
  const std::string admin_key = admin_key_of(o);
  auto provider = fairlane::make_curl_provider(io, provider_config(o, *dialect));
  if (!provider.ok()) return fail(provider.status().message());

  // A store several instances share (PostgreSQL) makes a cluster: the lease decides who
  // dispatches (Leadership, below). A single node dispatches from the start.
  fairlane::ClusterStore* cluster = store.value()->cluster();
  // A server database's commits take milliseconds: they go on a connection and a thread of
  // their own, off the io thread (Dispatcher, CommitThread).
  // So are the reads of a page's text for its call, on a third.
  auto side = open_more(o, store_options, cluster != nullptr ? 2 : 0);
  if (!side.ok()) return fail(side.status().message());
  std::vector<std::unique_ptr<fairlane::Store>>& stores = side.value();
  fairlane::service::Dispatcher dispatcher(io, *store.value(), *provider.value(),
                                           dispatcher_config(o),
                                           stores.empty() ? nullptr : std::move(stores[0]),
                                           stores.empty() ? nullptr : std::move(stores[1]));
  fairlane::service::Membership membership{instance_id(o), {}, cluster == nullptr, 0};
  if (cluster == nullptr) {
    membership.leader = membership.instance;
    if (const fairlane::Status started = dispatcher.start(); !started.ok()) {
      return fail(started.message());
    }
  }
  fairlane::service::RouterConfig router_config{admin_key, o.prompt, o.max_tokens, o.max_pages,
                                                o.max_page_kb * 1024};
  router_config.dialect = *dialect;
  router_config.promise_window = fairlane::from_seconds(o.promise_window);
  router_config.membership = &membership;
  auto readers = open_readers(o, store_options, cluster != nullptr);
  if (!readers.ok()) return fail(readers.status().message());
  router_config.readers = readers.value().get();
  // A key costs a round trip on a server database: a key found is taken as its user's for a
  // few seconds (a changed weight shows within them; keys are never taken back).
  if (cluster != nullptr) router_config.key_memory = std::chrono::seconds(5);
  fairlane::service::Retention retention(io, *store.value(), membership, retention_config(o),
                                         readers.value().get());
  router_config.retention = &retention;
  fairlane::service::Router router(*store.value(), dispatcher, router_config);
  std::optional<fairlane::service::Leadership> leadership;
  std::unique_ptr<fairlane::store::PgNotifications> notifications;
  if (cluster != nullptr) {
    leadership.emplace(
        io, *store.value(), dispatcher, router, membership,
        fairlane::service::LeadershipConfig{membership.instance,
                                            std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::duration<double>(o.lease_s))});
    // Listening before the lanes are read: nothing accepted elsewhere in between is missed.
    auto listening = fairlane::store::PgNotifications::open(
        io, o.db,
        {std::string(fairlane::kJobEnqueuedChannel), std::string(fairlane::kJobChangedChannel)},
        [&](std::string_view channel, std::string_view payload) {
          leadership->notified(channel, payload);
        },
        [&] { leadership->resync(); });
    if (!listening.ok()) return fail(listening.status().message());
    notifications = std::move(listening).value();
    if (const fairlane::Status started = leadership->start(); !started.ok()) {
      return fail(started.message());
    }
  }
  fairlane::service::HttpServer server(io, router, http_limits(o));
  auto bound = server.listen(address, *port);
  if (!bound.ok()) return fail(bound.status().message());

  // Once a second the running jobs' promises are projected again (Router::tick).
  boost::asio::steady_timer promises_timer(io);
  std::function<void()> keep_promises = [&] {
    promises_timer.expires_after(std::chrono::seconds(1));
    promises_timer.async_wait([&](const boost::system::error_code& error) {
      if (error) return;
      // The leader keeps the promises; a follower's view is only a view.
      if (membership.leading) router.tick();
      keep_promises();
    });
  };
  keep_promises();
  retention.start();

  int exit_status = kExitOk;
  boost::asio::steady_timer answers_deadline(io);
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& error, int) {
    if (error) return;
    std::cerr << "fairlane: stopping: no new work; calls in flight may finish\n";
    server.stop();
    promises_timer.cancel();
    retention.stop();
    dispatcher.stop(fairlane::from_seconds(o.stop_deadline), [&](const fairlane::Status& status) {
      if (!status.ok()) {
        std::cerr << "fairlane: " << status.message() << '\n';
        exit_status = kExitFailure;
      }
      // Once what was out is stored: a follower may lead at once.
      if (leadership) leadership->stop();
      notifications.reset();
      // Once every upload past the door has its answer (a 202 held for its promise window,
      // a commit out on a reader): none is committed and left unanswered. But not forever:
      // an answer still owed --stop-deadline later (a commit that never returns) is given up.
      server.when_answered([&] { io.stop(); });
      answers_deadline.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::duration<double>(o.stop_deadline)));
      answers_deadline.async_wait([&](const boost::system::error_code& cancelled) {
        if (!cancelled) io.stop();
      });
    });
  });
  std::cout << "listening on http://" << address << ':' << bound.value() << std::endl;
  io.run();
  return exit_status;
}

}  // namespace fairlane::cli
