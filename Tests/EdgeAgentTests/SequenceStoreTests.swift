import EdgeAgent
import FleetcastTestSupport
import FleetProtocol
import Logging
import Testing

@Suite("Sequence store")
struct SequenceStoreTests {
    private let vehicle = VehicleID("van-7")!
    private let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    @Test("numbers rise by one and continue without a gap after a clean restart")
    func cleanRestart() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let first = try SequenceStore(directory: dir.path, vehicle: vehicle, blockSize: 100, logger: logger)
        let taken = (0..<5).map { _ in first.next() }
        #expect(taken == [1, 2, 3, 4, 5])
        try first.close()
        #expect(dir.contents("van-7.seq") == "6\n")

        let second = try SequenceStore(directory: dir.path, vehicle: vehicle, blockSize: 100, logger: logger)
        #expect(second.next() == 6)
    }

    @Test("a block is reserved ahead: a crash skips numbers but never reuses one")
    func crashSkipsNeverReuses() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let crashed = try SequenceStore(directory: dir.path, vehicle: vehicle, blockSize: 1000, logger: logger)
        #expect(dir.contents("van-7.seq") == "1001\n", "the first block is reserved before any number is handed out")
        var last: UInt64 = 0
        for _ in 0..<1500 { last = crashed.next() }
        #expect(last == 1500)
        #expect(dir.contents("van-7.seq") == "2001\n", "crossing the block reserved the next one")
        // Simulated crash: no close(). The restart begins past every number handed out.
        let restarted = try SequenceStore(directory: dir.path, vehicle: vehicle, blockSize: 1000, logger: logger)
        let next = restarted.next()
        #expect(next > last)
        #expect(next == 2001)
    }

    @Test("the file is not written for every message")
    func writesOncePerBlock() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try SequenceStore(directory: dir.path, vehicle: vehicle, blockSize: 1000, logger: logger)
        for _ in 0..<999 { _ = store.next() }
        #expect(dir.contents("van-7.seq") == "1001\n")
    }

    @Test("each vehicle has its own counter")
    func perVehicle() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let a = try SequenceStore(directory: dir.path, vehicle: vehicle, logger: logger)
        let b = try SequenceStore(directory: dir.path, vehicle: VehicleID("truck-12")!, logger: logger)
        _ = a.next(); _ = a.next()
        #expect(b.next() == 1)
    }

    @Test("an unwritable state directory is a clear error naming the path")
    func unwritableDirectory() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let blocker = dir.createFile("not-a-directory", "x")
        let error = #expect(throws: SequenceStoreError.self) {
            try SequenceStore(directory: blocker, vehicle: vehicle, logger: logger)
        }
        #expect(error?.description.contains(blocker) == true)
        #expect(error?.description.contains("Not a directory") == true)

        let missingParent = dir.file("missing/deeper")
        let error2 = #expect(throws: SequenceStoreError.self) {
            try SequenceStore(directory: missingParent, vehicle: vehicle, logger: logger)
        }
        #expect(error2?.description.contains(missingParent) == true)
    }

    @Test("a corrupt counter file is refused with its path, not silently reset")
    func corruptFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.createFile("van-7.seq", "garbage\n")
        let error = #expect(throws: SequenceStoreError.self) {
            try SequenceStore(directory: dir.path, vehicle: vehicle, logger: logger)
        }
        #expect(error == .corrupt(path: path, content: "garbage\n"))
        #expect(dir.contents("van-7.seq") == "garbage\n", "the evidence is left in place")
    }

    @Test("no temporary file is left behind")
    func noTemporaryLeft() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try SequenceStore(directory: dir.path, vehicle: vehicle, logger: logger)
        _ = store.next()
        try store.close()
        #expect(dir.contents("van-7.seq.tmp") == nil)
    }
}
