// Membership: this instance's place in a cluster (DESIGN.md section 10), as GET /v1/queue and
// /metrics show it. A single node on SQLite is its own leader.
//
// Thread safety: a value, read and written on the io_context's thread.
#pragma once

#include <cstdint>
#include <string>

namespace fairlane::service {

struct Membership {
  std::string instance;    // this instance's id (serve --instance)
  std::string leader;      // the leader's id as last read; empty while none is known
  bool leading = false;    // whether this instance dispatches now
  std::int64_t epoch = 0;  // the leader's fencing epoch as last read; 0 on a single node
};

}  // namespace fairlane::service
