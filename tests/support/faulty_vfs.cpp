#include "support/faulty_vfs.hpp"

#include <sqlite3.h>

namespace fairlane::testing {
namespace {

struct Faults {
  bool disk_full = false;
  int writes_left = -1;  // writes until the disk is full; -1: no such countdown
  bool sync_broken = false;
  int refused = 0;
};
Faults faults;

sqlite3_vfs* real_vfs = nullptr;
sqlite3_vfs faulty_vfs{};
sqlite3_io_methods faulty_methods{};

// A file of the faulty VFS: our header, then the real VFS's file object right after it.
struct FaultyFile {
  sqlite3_file base;
  sqlite3_file* real;
};

sqlite3_file* real_file(sqlite3_file* file) {
  return reinterpret_cast<FaultyFile*>(file)->real;
}

int faulty_close(sqlite3_file* f) {
  return real_file(f)->pMethods->xClose(real_file(f));
}
int faulty_read(sqlite3_file* f, void* buffer, int amount, sqlite3_int64 offset) {
  return real_file(f)->pMethods->xRead(real_file(f), buffer, amount, offset);
}
int faulty_write(sqlite3_file* f, const void* buffer, int amount, sqlite3_int64 offset) {
  if (faults.writes_left == 0) faults.disk_full = true;
  if (faults.writes_left > 0) --faults.writes_left;
  if (faults.disk_full) {
    ++faults.refused;
    return SQLITE_FULL;
  }
  return real_file(f)->pMethods->xWrite(real_file(f), buffer, amount, offset);
}
int faulty_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return real_file(f)->pMethods->xTruncate(real_file(f), size);
}
int faulty_sync(sqlite3_file* f, int flags) {
  if (faults.sync_broken) {
    ++faults.refused;
    return SQLITE_IOERR_FSYNC;
  }
  return real_file(f)->pMethods->xSync(real_file(f), flags);
}
int faulty_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return real_file(f)->pMethods->xFileSize(real_file(f), size);
}
int faulty_lock(sqlite3_file* f, int level) {
  return real_file(f)->pMethods->xLock(real_file(f), level);
}
int faulty_unlock(sqlite3_file* f, int level) {
  return real_file(f)->pMethods->xUnlock(real_file(f), level);
}
int faulty_check_reserved_lock(sqlite3_file* f, int* out) {
  return real_file(f)->pMethods->xCheckReservedLock(real_file(f), out);
}
int faulty_file_control(sqlite3_file* f, int op, void* arg) {
  return real_file(f)->pMethods->xFileControl(real_file(f), op, arg);
}
int faulty_sector_size(sqlite3_file* f) {
  return real_file(f)->pMethods->xSectorSize(real_file(f));
}
int faulty_device_characteristics(sqlite3_file* f) {
  return real_file(f)->pMethods->xDeviceCharacteristics(real_file(f));
}
int faulty_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return real_file(f)->pMethods->xShmMap(real_file(f), page, size, extend, out);
}
int faulty_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return real_file(f)->pMethods->xShmLock(real_file(f), offset, n, flags);
}
void faulty_shm_barrier(sqlite3_file* f) {
  real_file(f)->pMethods->xShmBarrier(real_file(f));
}
int faulty_shm_unmap(sqlite3_file* f, int delete_flag) {
  return real_file(f)->pMethods->xShmUnmap(real_file(f), delete_flag);
}
int faulty_fetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  return real_file(f)->pMethods->xFetch(real_file(f), offset, amount, out);
}
int faulty_unfetch(sqlite3_file* f, sqlite3_int64 offset, void* page) {
  return real_file(f)->pMethods->xUnfetch(real_file(f), offset, page);
}

int faulty_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags,
                int* out_flags) {
  auto* faulty = reinterpret_cast<FaultyFile*>(file);
  faulty->real = reinterpret_cast<sqlite3_file*>(faulty + 1);
  const int rc = real_vfs->xOpen(real_vfs, name, faulty->real, flags, out_flags);
  // SQLite calls xClose only when pMethods is set, so set it only for an opened file.
  faulty->base.pMethods = faulty->real->pMethods != nullptr ? &faulty_methods : nullptr;
  return rc;
}

int faulty_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  return real_vfs->xDelete(real_vfs, name, sync_dir);
}
int faulty_access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return real_vfs->xAccess(real_vfs, name, flags, out);
}
int faulty_full_pathname(sqlite3_vfs*, const char* name, int size, char* out) {
  return real_vfs->xFullPathname(real_vfs, name, size, out);
}
int faulty_randomness(sqlite3_vfs*, int size, char* out) {
  return real_vfs->xRandomness(real_vfs, size, out);
}
int faulty_sleep(sqlite3_vfs*, int micros) {
  return real_vfs->xSleep(real_vfs, micros);
}
int faulty_current_time(sqlite3_vfs*, double* out) {
  return real_vfs->xCurrentTime(real_vfs, out);
}
int faulty_get_last_error(sqlite3_vfs*, int size, char* out) {
  return real_vfs->xGetLastError(real_vfs, size, out);
}
int faulty_current_time_int64(sqlite3_vfs*, sqlite3_int64* out) {
  return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

}  // namespace

void FaultyVfs::install() {
  faults = Faults{};
  if (real_vfs != nullptr) return;
  real_vfs = sqlite3_vfs_find(nullptr);
  faulty_methods = sqlite3_io_methods{3,
                                      faulty_close,
                                      faulty_read,
                                      faulty_write,
                                      faulty_truncate,
                                      faulty_sync,
                                      faulty_file_size,
                                      faulty_lock,
                                      faulty_unlock,
                                      faulty_check_reserved_lock,
                                      faulty_file_control,
                                      faulty_sector_size,
                                      faulty_device_characteristics,
                                      faulty_shm_map,
                                      faulty_shm_lock,
                                      faulty_shm_barrier,
                                      faulty_shm_unmap,
                                      faulty_fetch,
                                      faulty_unfetch};
  faulty_vfs = *real_vfs;
  faulty_vfs.szOsFile = static_cast<int>(sizeof(FaultyFile)) + real_vfs->szOsFile;
  faulty_vfs.zName = kName;
  faulty_vfs.pNext = nullptr;
  faulty_vfs.xOpen = faulty_open;
  faulty_vfs.xDelete = faulty_delete;
  faulty_vfs.xAccess = faulty_access;
  faulty_vfs.xFullPathname = faulty_full_pathname;
  faulty_vfs.xRandomness = faulty_randomness;
  faulty_vfs.xSleep = faulty_sleep;
  faulty_vfs.xCurrentTime = faulty_current_time;
  faulty_vfs.xGetLastError = faulty_get_last_error;
  faulty_vfs.xCurrentTimeInt64 = faulty_current_time_int64;
  // The dynamic-library and system-call hooks stay the real VFS's own.
  sqlite3_vfs_register(&faulty_vfs, 0);
}

void FaultyVfs::fill_disk() {
  faults.disk_full = true;
}
void FaultyVfs::fill_disk_after(int writes) {
  faults.writes_left = writes;
}
void FaultyVfs::break_sync() {
  faults.sync_broken = true;
}
void FaultyVfs::heal() {
  faults.disk_full = false;
  faults.writes_left = -1;
  faults.sync_broken = false;
}
int FaultyVfs::refused() {
  return faults.refused;
}

}  // namespace fairlane::testing
