#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Hands back the pages of program code and read-only data that a long-running process touched
/// while starting and will not touch again: argument parsing, configuration loading, opening
/// the store, the Swift runtime's first lookups. They are clean pages of files (the binary,
/// libcrypto, libstdc++…), so nothing is lost: what the process still runs is mapped again on
/// its next use, once. A vehicle's agent so stays at what it needs from then on (its resident
/// memory and its systemd unit's memory), not at what it needed in its first seconds.
///
/// Two steps, because the kernel lets a process free the page cache only of files it owns or
/// may write (Linux's `can_do_pageout`), and the agent's unit runs it as `fleetcast`, which may
/// not write the root-owned `/usr/bin/fleetcast-agent` or the libraries:
/// - `MADV_PAGEOUT` frees the pages where that is allowed (a build run by its owner);
/// - `MADV_DONTNEED` takes them out of this process's mappings in every case. The pages stay
///   in the page cache, shared and reclaimable as any cached file is, until memory is needed.
///
/// `MADV_DONTNEED` on a private mapping throws away what the process wrote into it, so only
/// mappings that are read-only and hold no page of the process's own (`Anonymous: 0 kB` in
/// `/proc/self/smaps`: never relocated data, whose pages are copies the loader wrote) are
/// touched. Linux only (`MADV_PAGEOUT`: kernel 5.4 and later); elsewhere it does nothing.
package enum StartupPages {
    /// `MADV_PAGEOUT` from <linux/mman.h> (not in every libc's headers).
    private static let adviceToPageOut: Int32 = 21

    /// Advises the kernel as above for every clean read-only file mapping of this process.
    /// Returns the bytes of the mappings advised; 0 where `/proc/self/smaps` cannot be read or
    /// this is not Linux.
    @discardableResult
    package static func release() -> Int {
        #if os(Linux)
        guard let smaps = try? AtomicFile.contents(of: "/proc/self/smaps", limit: 8 << 20) else { return 0 }
        var advised = 0
        for mapping in cleanReadOnlyFileMappings(smaps) {
            let start = UnsafeMutableRawPointer(bitPattern: mapping.start)
            _ = madvise(start, mapping.length, adviceToPageOut)
            if madvise(start, mapping.length, Int32(MADV_DONTNEED)) == 0 { advised += mapping.length }
        }
        return advised
        #else
        return 0
        #endif
    }

    /// The mappings of a `/proc/PID/smaps` text that map a file read-only (`r--p`, `r-xp`) and
    /// hold no anonymous page. A mapping whose `Anonymous:` line is missing (a text cut short)
    /// is left out.
    static func cleanReadOnlyFileMappings(_ smaps: [UInt8]) -> [(start: UInt, length: Int)] {
        var chosen: [(start: UInt, length: Int)] = []
        var candidate: (start: UInt, length: Int)?
        for line in smaps.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.last == UInt8(ascii: ":") {
                // A `Key: value kB` line of the mapping above.
                if let mapping = candidate, first.elementsEqual("Anonymous:".utf8) {
                    if fields.count >= 2, fields[1].elementsEqual("0".utf8) { chosen.append(mapping) }
                    candidate = nil
                }
            } else {
                candidate = readOnlyFileMapping(fields)
            }
        }
        return chosen
    }

    /// The range of a mapping's header line (`start-end perms offset dev inode path`, split into
    /// fields) when it maps a file read-only; `nil` for any other line.
    private static func readOnlyFileMapping<Field: Collection<UInt8>>(_ fields: [Field]) -> (start: UInt, length: Int)? {
        guard fields.count >= 6, fields[5].first == UInt8(ascii: "/") else { return nil }
        let permissions = Array(fields[1])
        guard permissions.count == 4, permissions[0] == UInt8(ascii: "r"), permissions[1] == UInt8(ascii: "-") else { return nil }
        let range = fields[0].split(separator: UInt8(ascii: "-"))
        guard range.count == 2, let start = UInt(String(decoding: range[0], as: UTF8.self), radix: 16),
            let end = UInt(String(decoding: range[1], as: UTF8.self), radix: 16), end > start
        else { return nil }
        return (start, Int(end - start))
    }
}
