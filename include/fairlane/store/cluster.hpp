// ClusterStore: what the instances of a cluster share through a PostgreSQL database beyond
// the Store (DESIGN.md section 10): the leader's lease, the fencing epoch every page
// transition of the leader carries, and the reads an instance needs to follow what another
// wrote. Store::cluster() gives it; the SQLite store has none (one process, no cluster).
//
// The lease is a row (holder, epoch, expires_at) in server time. An instance claims it when
// it is free or expired, and renews it while it holds it; each change of holder increments
// the epoch. Once fence(epoch) was called, every page transition the store writes goes
// through only while the row still names this instance with that epoch and has not expired;
// otherwise the batch changes nothing and the write returns StatusCode::fenced. A
// cancellation (job_cancelled) is a user's act, written by any instance, and is not fenced.
//
// Thread safety: as the Store that gives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fairlane/core/ids.hpp"
#include "fairlane/core/result.hpp"
#include "fairlane/core/status.hpp"
#include "fairlane/store/lane.hpp"
#include "fairlane/store/store.hpp"

namespace fairlane {

struct LeaseState {
  std::string leader;      // the instance holding the lease; empty when none does
  std::int64_t epoch = 0;  // incremented at every change of holder; 0 before the first
  bool held = false;       // whether the instance that asked holds it now
  std::chrono::milliseconds remaining{0};  // until it expires, in server time (0: expired)
};

// The channels the store notifies (LISTEN/NOTIFY), each payload a job's id in decimal,
// delivered when the transaction that made the change commits. (PostgreSQL's store writes
// these names in its SQL too: src/store/pg_queries.hpp and schema/pg/0003_cluster.sql.)
inline constexpr std::string_view kJobEnqueuedChannel = "fairlane_job_enqueued";
inline constexpr std::string_view kJobChangedChannel = "fairlane_job_changed";

class ClusterStore {
 public:
  virtual ~ClusterStore() = default;

  // Takes the lease for `instance` if it is free or expired, or renews it if `instance`
  // holds it, for `lease` from now (server time); returns who holds it afterwards.
  virtual Result<LeaseState> claim_lease(std::string_view instance,
                                         std::chrono::milliseconds lease) = 0;
  // Gives the lease up if `instance` holds it (a clean stop), so a follower takes over at
  // once rather than after the lease runs out.
  virtual Status release_lease(std::string_view instance) = 0;
  // From now on every page transition this store writes carries `instance` and `epoch`
  // (see above); epoch 0 writes unfenced again (tests, a single node).
  virtual void fence(std::string_view instance, std::int64_t epoch) = 0;

  // The job and its queued pages in lane order (EnqueuedJob::created true), for a leader
  // adding a job another instance accepted; not_found for an unknown job.
  virtual Result<EnqueuedJob> queued_job(JobId job) = 0;
  // The lanes as they stand, queued pages only, each head first, without changing anything
  // (load_lanes() turns pages in flight back to queued; this does not): a follower's view.
  virtual Result<std::vector<Lane>> lanes_view() = 0;
};

}  // namespace fairlane
