// What each piece of `fairlane serve` is given, from its options: the address to listen
// on, this instance's id, the admin key, and the provider client's, dispatcher's, router's,
// retention's and HTTP server's configurations. Pure translation, apart from the host name,
// the process id and the admin key's variable that it reads; serve.cpp composes the pieces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/serve.hpp"
#include "fairlane/provider/curl_provider.hpp"
#include "service/dispatcher.hpp"
#include "service/http_server.hpp"
#include "service/retention.hpp"
#include "service/routes.hpp"

namespace fairlane::cli {

// --listen's IP:PORT.
struct ListenAddress {
  std::string address;     // an IP address as written, IPv6 without its brackets
  std::uint16_t port = 0;  // 0: any free port

  // The address as a URL's host: IPv6 in brackets.
  [[nodiscard]] std::string url_host() const;
};

// --listen's IP:PORT ("127.0.0.1:8080", "[::1]:8080"): an IPv4 address, or an IPv6 one in
// brackets, and a port of digits only, 0 to 65535. Anything else (a host name such as
// localhost, a port with more after it) is invalid_argument, naming what is wrong and what
// to write instead.
fairlane::Result<ListenAddress> listen_address(const std::string& listen);

// --instance, or the host's name and this process's id: unique among the instances of a
// cluster, and new at every start (a restarted leader is a new instance).
std::string instance_id(const ServeOptions& o);

// The admin key from --admin-key-env's variable ("" when unset), warning on stderr when it
// is short (never printing it).
std::string admin_key_of(const ServeOptions& o);

fairlane::CurlProviderConfig provider_config(const ServeOptions& o, fairlane::Dialect dialect);
fairlane::service::DispatcherConfig dispatcher_config(const ServeOptions& o);
fairlane::service::RetentionConfig retention_config(const ServeOptions& o);
// The routes' configuration apart from what depends on the store (the key memory) and what
// points at other pieces (membership, readers, retention), which serve sets once they are
// made. It reads the admin key's variable: call it before any thread starts.
fairlane::service::RouterConfig router_config(const ServeOptions& o, fairlane::Dialect dialect);
// What the HTTP server holds a request to, the reader of uploaded PDFs included.
fairlane::service::HttpLimits http_limits(const ServeOptions& o);

}  // namespace fairlane::cli
