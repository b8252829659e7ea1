// The provider client and the stand-in on loopback at zero latency. Targets: >= 2,000
// calls/s with 64 in flight, the client's CPU time per call reported; the stand-in holds
// 1,000 open connections (docs/performance.md). The stand-in runs on its own thread and
// io_context, so the client's CPU time is its thread's alone.
#include <benchmark/benchmark.h>
#include <time.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <variant>

#include "fairlane/provider/curl_provider.hpp"
#include "provider_sim.hpp"

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A stand-in with no limits and no latency, on a thread of its own.
class StandIn {
 public:
  StandIn() : server_(io_, config()), work_(io_.get_executor()) {
    port_ = server_.listen("127.0.0.1", 0).value();
    thread_ = std::thread([this] { io_.run(); });
  }
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;
  // A stand-in that cannot be stopped ends the benchmark: std::terminate is the right end.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  ~StandIn() {
    boost::asio::post(io_, [this] {
      server_.stop();
      work_.reset();
    });
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The stand-in's GET /stats, read on its own thread.
  std::string stats() {
    std::promise<std::string> answer;
    boost::asio::post(io_, [&] { answer.set_value(server_.stats_json()); });
    return answer.get_future().get();
  }

 private:
  static fairlane::provider_sim::Config config() {
    fairlane::provider_sim::Config c;
    c.requests_per_minute = 0;
    c.tokens_per_minute = 0;
    c.max_in_flight = 0;
    c.latency_ms = 0;
    return c;
  }
  boost::asio::io_context io_;
  fairlane::provider_sim::Server server_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  std::uint16_t port_ = 0;
};

// Keeps `in_flight` calls going for as long as the benchmark runs; each iteration is one
// completed call.
void BM_ProviderLoopback(benchmark::State& state) {
  const auto in_flight = static_cast<int>(state.range(0));
  StandIn stand_in;
  boost::asio::io_context io;
  fairlane::CurlProviderConfig config;
  config.base_url = stand_in.url();
  config.max_connections = static_cast<std::size_t>(in_flight);
  auto provider = fairlane::make_curl_provider(io, config).value();
  const fairlane::ProviderRequest request{"Extract the text.", std::string(3'000, 'p'), "m", 240};

  std::int64_t completed = 0;
  std::int64_t failed = 0;
  std::function<void(fairlane::ProviderOutcome)> done = [&](const fairlane::ProviderOutcome& o) {
    ++completed;
    if (!std::holds_alternative<fairlane::outcome::Ok>(o.kind)) ++failed;
  };
  for (int i = 0; i < in_flight; ++i) provider->call(request, done);
  const double cpu_start = thread_cpu_seconds();
  std::int64_t counted = 0;
  for (auto _ : state) {
    while (completed == counted) io.run_one();
    ++counted;
    provider->call(request, done);
  }
  const double cpu = thread_cpu_seconds() - cpu_start;
  state.SetItemsProcessed(state.iterations());
  state.counters["client_cpu_us_per_call"] = cpu * 1e6 / static_cast<double>(state.iterations());
  state.counters["failed"] = static_cast<double>(failed);
  // Let the last calls finish before the stand-in goes.
  while (provider->in_flight() > 0) io.run_one();
  const auto stats = boost::json::parse(stand_in.stats()).as_object();
  state.counters["server_max_connections"] =
      static_cast<double>(stats.at("max_connections_seen").as_int64());
}
BENCHMARK(BM_ProviderLoopback)->Arg(64)->Arg(1'000)->UseRealTime()->MinTime(3.0);

}  // namespace
