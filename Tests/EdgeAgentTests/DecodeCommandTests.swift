import FleetcastTestSupport
import Foundation
import GNSS
import NMEA
import Testing

/// `fleetcast-agent decode`, run end to end as the built binary.
@Suite("fleetcast-agent decode (binary)")
struct DecodeCommandTests {
    static var binary: URL { URL(fileURLWithPath: builtProduct("fleetcast-agent")) }

    /// The gpsd recordings the NMEA tests decode (`Tests/NMEATests/Fixtures/gpsd`).
    enum Fixtures {
        static var gpsdFolder: URL { URL(fileURLWithPath: RepositoryPath.of("Tests/NMEATests/Fixtures/gpsd")) }
        static func bytes(_ url: URL) throws -> [UInt8] { [UInt8](try Data(contentsOf: url)) }
    }

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    func run(_ arguments: [String], stdin: Data? = nil) throws -> Run {
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["decode"] + arguments
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            // Write from another thread so a full stdout pipe cannot deadlock us.
            let writer = input.fileHandleForWriting
            Thread.detachNewThread {
                writer.write(stdin)
                try? writer.close()
            }
        }
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus,
            stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData, as: UTF8.self))
    }

    @Test("a recording decodes to JSON lines matching the library, with a summary on stderr")
    func recording() throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary.path), "build the package first: \(Self.binary.path)")
        let log = Fixtures.gpsdFolder.appendingPathComponent("saab-r4.log")
        let r = try run([log.path])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == lines.count, "every line is one JSON object")
        var decoder = NMEADecoder()
        let events = decoder.decode(try Fixtures.bytes(log))
        let fixes = events.compactMap { if case .fix(let fix) = $0 { fix } else { nil } }
        let headings = events.compactMap { if case .heading(let heading) = $0 { heading } else { nil } }
        #expect(objects.filter { $0["kind"] as? String == "fix" }.count == fixes.count)
        #expect(objects.filter { $0["kind"] as? String == "heading" }.count == headings.count)
        #expect(objects.first { $0["kind"] as? String == "fix" }?["time"] as? String == fixes.first?.time.iso8601)
        #expect(objects.allSatisfy { $0["v"] as? Int == 1 && $0["vehicle"] == nil && $0["seq"] == nil })
        let s = decoder.statistics
        #expect(r.stderr.contains("sentences \(s.sentences), fixes \(s.fixes), headings \(s.headings)"))
        #expect(r.stderr.contains("binary frames \(s.binaryFrames)\n"))
        #expect(r.stderr.contains("bad checksums \(s.badChecksums)") && r.stderr.contains("ignored \(s.ignored)"))
        #expect(r.stderr.contains("framing errors \(s.framingErrors)"))
    }

    @Test("stdin gives the same output as the file")
    func stdin() throws {
        let log = Fixtures.gpsdFolder.appendingPathComponent("ublox-zed-f9p-nmea.log")
        let fromFile = try run([log.path])
        let fromStdin = try run([], stdin: try Data(contentsOf: log))
        #expect(fromStdin.status == 0)
        #expect(!fromFile.stdout.isEmpty && fromStdin.stdout == fromFile.stdout)
    }

    @Test("a missing file: non-zero exit, its name and the OS error on stderr; the other files still decoded")
    func missingFile() throws {
        let missing = "/nonexistent-\(UUID().uuidString).log"
        let log = Fixtures.gpsdFolder.appendingPathComponent("polarx2.log")
        let r = try run([missing, log.path])
        #expect(r.status != 0)
        #expect(r.stderr.contains(missing) && r.stderr.contains("No such file or directory"))
        #expect(r.stdout.contains("\"kind\":\"fix\""))
    }

    @Test("corrupt input exits 0; --no-checksum-ok decodes a receiver without checksums")
    func corruptAndNoChecksum() throws {
        var rng = SplitMix64(seed: 7)
        let noise = Data((0..<20_000).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let r = try run([], stdin: noise)
        #expect(r.status == 0)
        #expect(r.stderr.contains("sentences"))
        let plain = Data(withoutChecksums(try Fixtures.bytes(Fixtures.gpsdFolder.appendingPathComponent("magellan-ec10.log"))))
        let strict = try run([], stdin: plain), lenient = try run(["--no-checksum-ok"], stdin: plain)
        #expect(strict.status == 0 && !strict.stdout.contains("\"kind\":\"fix\""))
        #expect(lenient.status == 0 && lenient.stdout.contains("\"kind\":\"fix\""))
    }
}
