#ifndef FLEETCAST_CMALLOC_SHIM_H
#define FLEETCAST_CMALLOC_SHIM_H

// glibc's allocator tuning (mallopt(3)), which Glibc's Swift module does not export
// (<malloc.h>), hence this wrapper. Used by `fleet-watch serve` only.

#include <malloc.h>

/// Serves every allocation of at least `bytes` from its own mapping, returned to the system
/// when freed, and stops glibc from raising that threshold by itself. Returns 1 on success.
static inline int fleetcast_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }

#endif
