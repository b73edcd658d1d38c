import Testing

@testable import FleetcastCore

@Suite struct StartupPagesTests {
    @Test("only read-only mappings of files are chosen: code and constant data, never data, heap or stack")
    func readOnlyFileMappingsOnly() {
        func pick(_ line: String) -> (start: UInt, length: Int)? { StartupPages.readOnlyFileMapping(Array(line.utf8)) }
        let code = pick("55d0c0a00000-55d0c1400000 r-xp 00200000 08:01 131 /usr/bin/fleetcast-agent")
        #expect(code?.start == 0x55d0_c0a0_0000 && code?.length == 0xa0_0000)
        #expect(pick("7f10a0000000-7f10a0100000 r--p 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libcrypto.so.3")?.length == 0x10_0000)
        #expect(pick("55d0c1400000-55d0c1500000 rw-p 00c00000 08:01 131 /usr/bin/fleetcast-agent") == nil, "writable data")
        #expect(pick("55d0c1500000-55d0c1600000 rw-p 00000000 00:00 0 [heap]") == nil)
        #expect(pick("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]") == nil)
        #expect(pick("7f10a0000000-7f10a0100000 r--p 00000000 00:00 0 ") == nil, "anonymous")
        #expect(pick("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]") == nil)
        #expect(pick("not a mapping") == nil)
    }
}
