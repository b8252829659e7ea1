#include "cli/serve_config.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/address.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "cli/commands.hpp"

namespace fairlane::cli {
namespace {

// 32 hex digits are 128 bits.
constexpr std::size_t kMinAdminKeyChars = 32;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(seconds));
}

}  // namespace

std::string ListenAddress::url_host() const {
  return address.find(':') != std::string::npos ? "[" + address + "]" : address;
}

fairlane::Result<ListenAddress> listen_address(const std::string& listen) {
  const auto wrong = [&listen](std::string_view what) {
    return Status(StatusCode::invalid_argument,
                  fmt::format("--listen takes IP:PORT, not '{}': {}", listen, what));
  };
  constexpr std::string_view kUseAnIp =
      "use an IP address, such as 127.0.0.1:8080 or [::1]:8080 (0.0.0.0 or [::] for every "
      "interface)";
  std::string host;
  std::string_view port;
  if (!listen.empty() && listen.front() == '[') {
    const auto close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return wrong(fmt::format("an IPv6 address in brackets is followed by :PORT; {}", kUseAnIp));
    }
    host = listen.substr(1, close - 1);
    port = std::string_view(listen).substr(close + 2);
  } else {
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos) {
      return wrong("it names no port: add a port of digits, 0 to 65535 (0: any free one)");
    }
    host = listen.substr(0, colon);
    port = std::string_view(listen).substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      return wrong(fmt::format("an IPv6 address goes in brackets; {}", kUseAnIp));
    }
  }
  // Digits only: std::stoi read "80x" as 80, and took " 80" and "+80".
  unsigned number = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || number > 65535) {
    return wrong("it needs a port of digits, 0 to 65535 (0: any free one)");
  }
  boost::system::error_code not_ip;
  const auto ip = boost::asio::ip::make_address(host, not_ip);
  if (not_ip) {
    return wrong(fmt::format("'{}' is not an IP address (host names are not looked up); {}", host,
                             kUseAnIp));
  }
  if (listen.front() == '[' && !ip.is_v6()) {
    return wrong(fmt::format("brackets hold an IPv6 address; {}", kUseAnIp));
  }
  return ListenAddress{host, static_cast<std::uint16_t>(number)};
}

std::string instance_id(const ServeOptions& o) {
  if (!o.instance.empty()) return o.instance;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  return fmt::format("{}-{}", host.data()[0] != '\0' ? host.data() : "fairlane", getpid());
}

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
  // As many connections as calls may be in flight; 0 (no cap on calls) is no cap on them.
  client.max_connections = static_cast<std::size_t>(std::max<std::int64_t>(o.max_in_flight, 0));
  client.call_timeout = fairlane::from_seconds(o.call_timeout);
  return client;
}

fairlane::service::DispatcherConfig dispatcher_config(const ServeOptions& o) {
  fairlane::service::DispatcherConfig config;
  // 250 ms of the token refill kept unspent: the provider's bucket counts from our calls'
  // arrivals, ours from their sending (BudgetLimits::token_headroom).
  config.limits = fairlane::BudgetLimits::served(o.rpm, o.tpm, o.max_in_flight);
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

fairlane::service::RouterConfig router_config(const ServeOptions& o, fairlane::Dialect dialect) {
  fairlane::service::RouterConfig config{admin_key_of(o), o.prompt, o.max_tokens, o.max_pages,
                                         o.max_page_kb * 1024};
  config.dialect = dialect;
  config.promise_window = fairlane::from_seconds(o.promise_window);
  // At least one body of the largest size: below, such a body could never be received.
  config.max_body_bytes = static_cast<std::size_t>(o.max_body_mb) * 1024 * 1024;
  config.max_receiving_bytes =
      static_cast<std::size_t>(std::max(o.max_receiving_mb, o.max_body_mb)) * 1024 * 1024;
  return config;
}

fairlane::service::HttpLimits http_limits(const ServeOptions& o) {
  fairlane::service::HttpLimits limits;
  limits.max_body_bytes = static_cast<std::size_t>(o.max_body_mb) * 1024 * 1024;
  limits.max_header_bytes = static_cast<std::size_t>(o.max_header_kb) * 1024;
  limits.max_connections = static_cast<std::size_t>(o.max_connections);
  limits.read_timeout = std::chrono::seconds(static_cast<std::int64_t>(std::ceil(o.read_timeout)));
  limits.write_timeout =
      std::chrono::seconds(static_cast<std::int64_t>(std::ceil(o.write_timeout)));
  limits.heartbeat = millis(o.heartbeat);
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
  limits.documents.reader.timeout = millis(o.pdf_timeout);
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

}  // namespace fairlane::cli
