// FaultyVfs: an SQLite VFS that passes every call to the default VFS, except that it can be
// told to fail writes (as a full disk would) or syncs (as a dying disk would). Tests open a
// real database through it (StoreOptions::vfs = FaultyVfs::kName) and inject faults
// beneath the store, as LevelDB's SpecialEnv does, rather than mocking the store.
//
// Thread safety: the fault switches are process-wide; tests that use them run alone.
#pragma once

namespace fairlane::testing {

class FaultyVfs {
 public:
  static constexpr const char* kName = "fairlane-faulty";

  // Registers the VFS (once; later calls do nothing) and clears every fault.
  static void install();

  // From now on every write fails with SQLITE_FULL, until heal().
  static void fill_disk();
  // The next `writes` writes succeed, then every one fails with SQLITE_FULL until heal():
  // a disk that fills up in the middle of a transaction.
  static void fill_disk_after(int writes);
  // From now on every sync fails with SQLITE_IOERR_FSYNC, until heal().
  static void break_sync();
  // Clears every fault.
  static void heal();

  // Writes and syncs refused since install().
  static int refused();
};

}  // namespace fairlane::testing
