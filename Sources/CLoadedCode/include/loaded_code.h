#ifndef FLEETCAST_LOADED_CODE_H
#define FLEETCAST_LOADED_CODE_H
#include <stddef.h>

/// Advises the kernel to page out (MADV_PAGEOUT, where it lets this process) and takes out of
/// this process (MADV_DONTNEED) the whole pages of every non-writable loaded segment of the
/// program and its libraries (code and constant data), objects with text relocations and the
/// vDSO excepted. Runs under the loader's lock (dl_iterate_phdr holds it), so no object is
/// loaded or unloaded meanwhile. Returns the bytes advised. Used by FleetcastCore.StartupPages.
size_t fleetcast_release_loaded_code(void);
#endif
