#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Hands back to the kernel the pages of program code and read-only data that a long-running
/// process touched while starting and will not touch again: argument parsing, configuration
/// loading, opening the store, the Swift runtime's first lookups. They are clean pages of files
/// (the binary, libcrypto, libstdc++…), so nothing is lost: what the process still runs is read
/// back on its next use, once. A vehicle's agent so stays at what it needs from then on (its
/// resident memory and its systemd unit's memory), not at what it needed in its first seconds.
///
/// Linux only (`MADV_PAGEOUT`, kernel 5.4 and later); elsewhere, and on an older kernel, it does
/// nothing. Pages that other processes map too (libc's) are left where they are by the kernel.
package enum StartupPages {
    /// `MADV_PAGEOUT` from <linux/mman.h> (not in every libc's headers).
    private static let adviceToPageOut: Int32 = 21
    /// `MADV_RANDOM`: a page read back is read alone, not with its neighbours (read-around),
    /// so only what still runs comes back.
    private static let adviceRandom: Int32 = 1

    /// Advises the kernel to page out every read-only file mapping of this process (code and
    /// constant data; never anything writable, anonymous or a stack), and to read those pages
    /// back one at a time. Returns the bytes of the mappings advised; 0 where the kernel refused
    /// or this is not Linux.
    @discardableResult
    package static func release() -> Int {
        #if os(Linux)
        guard let maps = try? AtomicFile.contents(of: "/proc/self/maps", limit: 1 << 20) else { return 0 }
        var advised = 0
        for line in maps.split(separator: UInt8(ascii: "\n")) {
            guard let mapping = readOnlyFileMapping(line) else { continue }
            let start = UnsafeMutableRawPointer(bitPattern: mapping.start)
            _ = madvise(start, mapping.length, adviceRandom)
            if madvise(start, mapping.length, adviceToPageOut) == 0 { advised += mapping.length }
        }
        return advised
        #else
        return 0
        #endif
    }

    /// The range of a `/proc/self/maps` line (`start-end perms offset dev inode path`) that maps
    /// a file read-only (`r--p` or `r-xp`); `nil` for any other line.
    static func readOnlyFileMapping(_ line: some Collection<UInt8>) -> (start: UInt, length: Int)? {
        let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
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
