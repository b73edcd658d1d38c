import Testing

@testable import FleetcastCore

@Suite struct StartupPagesTests {
    /// One mapping of `/proc/PID/smaps`: its header and the lines the choice depends on (the
    /// kernel writes two dozen; the others are passed over).
    private func mapping(_ header: String, anonymous: Int?) -> String {
        "\(header)\nSize:               1024 kB\nRss:                 512 kB\n"
            + (anonymous.map { "Anonymous:          \($0) kB\n" } ?? "") + "VmFlags: rd ex mr mw me\n"
    }

    @Test("only clean read-only mappings of files are chosen: code and constant data, never relocated, writable, heap or stack")
    func cleanReadOnlyFileMappingsOnly() {
        let smaps = [
            mapping("55d0c0a00000-55d0c1400000 r-xp 00200000 08:01 131 /usr/bin/fleetcast-agent", anonymous: 0),
            mapping("7f10a0000000-7f10a0100000 r--p 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libcrypto.so.3", anonymous: 0),
            // Relocated read-only data (RELRO): the loader's copies; dropping them would lose the relocations.
            mapping("55d0c1400000-55d0c1480000 r--p 00c00000 08:01 131 /usr/bin/fleetcast-agent", anonymous: 512),
            mapping("55d0c1480000-55d0c1500000 rw-p 00c80000 08:01 131 /usr/bin/fleetcast-agent", anonymous: 0),
            mapping("55d0c1500000-55d0c1600000 rw-p 00000000 00:00 0 [heap]", anonymous: 1024),
            mapping("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]", anonymous: 4),
            mapping("7f10a0200000-7f10a0300000 r--p 00000000 00:00 0 ", anonymous: 0),
            mapping("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]", anonymous: 0),
            // Cut short before its Anonymous line (a read that hit its limit): not chosen.
            mapping("7f10a0400000-7f10a0500000 r-xp 00000000 08:01 78 /usr/lib/x86_64-linux-gnu/libc.so.6", anonymous: nil),
        ].joined()
        let chosen = StartupPages.cleanReadOnlyFileMappings(Array(smaps.utf8))
        #expect(chosen.map(\.start) == [0x55d0_c0a0_0000, 0x7f10_a000_0000])
        #expect(chosen.map(\.length) == [0xa0_0000, 0x10_0000])
        #expect(StartupPages.cleanReadOnlyFileMappings(Array("not smaps\n: 0\n".utf8)).isEmpty)
    }

    @Test("this process's own smaps: its code is chosen, and nothing it wrote")
    func ownMappings() throws {
        let smaps = try #require(try AtomicFile.contents(of: "/proc/self/smaps", limit: 8 << 20))
        let chosen = StartupPages.cleanReadOnlyFileMappings(smaps)
        #expect(!chosen.isEmpty)
        // Every chosen range is read-only and file-backed in /proc/self/maps too.
        let maps = try #require(try AtomicFile.contents(of: "/proc/self/maps", limit: 1 << 20))
        let lines = maps.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
        for range in chosen {
            let prefix = String(range.start, radix: 16) + "-"
            let line = try #require(lines.first { $0.hasPrefix(prefix) }, "\(prefix) is in /proc/self/maps")
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            #expect(fields[1].hasPrefix("r-") && fields.count >= 6 && fields[5].hasPrefix("/"), "\(line)")
        }
    }
}
