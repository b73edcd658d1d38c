import EdgeConfiguration
import FleetcastTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A configuration file over 1 MiB is refused before it is read: a 600 MB sparse file costs no
/// disk, and read whole it would be an OOM kill under the unit's `MemoryMax=64M`.
@Suite("Configuration file size")
struct ConfigurationFileSizeTests {
    /// Makes `path` a sparse file of `size` bytes (a hole: no disk used) with `ftruncate`.
    static func makeSparseFile(_ path: String, size: Int) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(descriptor >= 0, "create \(path)")
        defer { close(descriptor) }
        try #require(ftruncate(descriptor, off_t(size)) == 0, "ftruncate \(path)")
    }

    /// Runs `body` with `agent.yaml`, a 600 MB sparse file, in a new temporary directory named
    /// from `prefix` (removed afterwards): the directory and the file's path.
    static func withSparseConfiguration(
        prefix: String, _ body: (TemporaryDirectory, String) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: prefix)
        defer { directory.remove() }
        let path = directory.file("agent.yaml")
        try makeSparseFile(path, size: 600_000_000)
        try await body(directory, path)
    }

    /// The problems of loading `path`, or `[]` when it loads.
    static func problems(_ path: String) async -> [String] {
        do {
            _ = try await AgentConfiguration.load(filePath: path, environment: ["FLEETCAST_VEHICLE": "van-7"], flags: [:])
            return []
        } catch {
            return error.problems.map(\.message)
        }
    }

    @Test("a 600 MB sparse file is refused without being read, naming the file and the limit")
    func sparseFileRefused() async throws {
        try await Self.withSparseConfiguration(prefix: "fleetcast-config-size") { _, path in
            let clock = ContinuousClock()
            let start = clock.now
            let problems = await Self.problems(path)
            #expect(clock.now - start < .seconds(1), "refused unread, not read and then measured")
            #expect(
                problems == [
                    "cannot read configuration file \(path): it has 600000000 bytes, more than the 1048576 (1 MiB) a configuration file may have; it was not read"
                ])
        }
    }

    @Test("1 MiB is taken, one byte more is not")
    func limitIsOneMebibyte() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-config-limit")
        defer { directory.remove() }
        #expect(LibYAMLSnapshot.maximumBytes == 1 << 20)
        let line = "vehicle: van-7\n"
        let padding = String(repeating: "#", count: LibYAMLSnapshot.maximumBytes - line.utf8.count - 1) + "\n"
        let exact = try directory.createFile("exact.yaml", line + padding)
        #expect(await Self.problems(exact) == [])
        let over = try directory.createFile("over.yaml", line + padding + "\n")
        let refused = await Self.problems(over)
        #expect(refused.count == 1 && refused[0].contains("it has 1048577 bytes, more than the 1048576 (1 MiB)"), "\(refused)")
    }

    @Test("a file that is not a regular file is read bounded too: a pipe of 2 MiB is refused")
    func pipeBounded() async throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = ends[1]
        // The writer stops when the reader closes its end (EPIPE; SIGPIPE is ignored by the runner).
        let feeding = Thread {
            let chunk = [UInt8](repeating: UInt8(ascii: "#"), count: 64 << 10)
            var sent = 0
            while sent < 2 << 20 {
                let n = chunk.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                sent += n
            }
            close(writer)
        }
        signal(SIGPIPE, SIG_IGN)
        feeding.start()
        let problems = await Self.problems("/proc/self/fd/\(ends[0])")
        #expect(problems.count == 1 && problems[0].contains("it has more than 1048576 bytes"), "\(problems)")
    }

    @Test("`fleetcast-agent run` on the sparse file: exit 78, the file and the limit named, and little memory used")
    func agentProcess() async throws {
        try await Self.withSparseConfiguration(prefix: "fleetcast-config-size-agent") { directory, path in
            // GNU time's %M: the largest resident set, in KiB.
            let process = try TestProcess(
                "/usr/bin/time", ["-f", "maxrss-kib=%M", builtProduct("fleetcast-agent"), "run", "--config", path],
                directory: directory.path, name: "run")
            #expect(try await process.waitForExit(timeout: .seconds(60)) == 78)
            let errors = process.standardError
            #expect(
                errors.contains("cannot read configuration file \(path): it has 600000000 bytes, more than the 1048576 (1 MiB)"),
                "\(errors)")
            let rss = errors.split(separator: "\n").compactMap { $0.hasPrefix("maxrss-kib=") ? Int($0.dropFirst(11)) : nil }.last
            let kib = try #require(rss, "\(errors)")
            // Under ThreadSanitizer (where the test command runs the agent's tests, built in
            // .build-tsan) the agent carries the sanitizer's shadow memory, about 5 MiB more here: the
            // bound there is the one that tells a bounded read from the 634 MB of reading the whole
            // file.
            let sanitized = builtProduct("fleetcast-agent").contains(".build-tsan")
            let limit = sanitized ? 256 << 10 : 64 << 10
            #expect(kib < limit, "under \(sanitized ? "256 MiB (ThreadSanitizer)" : "the unit's MemoryMax=64M"): \(kib) KiB")
        }
    }
}
