#if os(Linux)
import CLoadedCode
#endif

/// Hands back the pages of program code and constant data that a long-running process touched
/// while starting and will not touch again: argument parsing, configuration loading, opening
/// the store, the Swift runtime's first lookups. They are clean pages of files (the binary,
/// libcrypto, libstdc++…), so nothing is lost: what the process still runs is mapped again on
/// its next use, once. A vehicle's agent so stays at what it needs from then on (its resident
/// memory and its systemd unit's memory), not at what it needed in its first seconds.
///
/// Two steps, because the kernel frees a file's cached pages only for a process that owns the
/// file or may write it (Linux's `can_do_pageout`), and the agent's unit runs it as `fleetcast`,
/// which may write neither the root-owned `/usr/bin/fleetcast-agent` nor the libraries:
/// - `MADV_PAGEOUT` frees the pages where that is allowed (a build run by its owner);
/// - `MADV_DONTNEED` takes them out of this process in every case. The pages stay in the page
///   cache, shared and reclaimable as any cached file is, until memory is needed.
///
/// `MADV_DONTNEED` throws away what a process wrote into a private mapping, so only the
/// segments the loader mapped without write permission are chosen, as the loader lists them
/// (`dl_iterate_phdr`, under its lock: no library is loaded or unloaded meanwhile): never
/// relocated data (RELRO lies in a writable segment), nor an object with text relocations, nor
/// a page a segment shares with its neighbour. Linux only (`MADV_PAGEOUT`: kernel 5.4 and
/// later); elsewhere it does nothing.
package enum StartupPages {
    /// Advises the kernel as above for every loaded read-only segment of this process. Returns
    /// the bytes advised; 0 where this is not Linux.
    @discardableResult
    package static func release() -> Int {
        #if os(Linux)
        Int(fleetcast_release_loaded_code())
        #else
        0
        #endif
    }
}
