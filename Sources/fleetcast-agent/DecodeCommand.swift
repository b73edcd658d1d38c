import ArgumentParser
import FleetProtocol
import GNSS
import NMEA

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `fleetcast-agent decode [FILE…]`: decodes NMEA 0183 recordings (stdin when no file) into
/// JSON lines of the public contract, one fix or heading per line, with a summary on stderr.
struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode NMEA 0183 from files or stdin into JSON lines (one fix or heading per line)."
    )

    @Argument(help: "Recordings to decode, in order, as one stream; stdin when none.")
    var files: [String] = []

    @Flag(name: .customLong("no-checksum-ok"), help: "Accept sentences without a *hh checksum.")
    var acceptsMissingChecksum = false

    func run() throws {
        var decoder = NMEADecoder(options: .init(acceptsMissingChecksum: acceptsMissingChecksum))
        var out = OutputBuffer(fd: STDOUT_FILENO)
        let emit: (GNSSEvent) -> Void = { event in
            switch event {
            case .fix(let fix): out.line(FleetPayload.encode(fix, includeKind: true))
            case .heading(let heading): out.line(FleetPayload.encode(heading, includeKind: true))
            case .state: break
            }
        }
        var failures: [String] = []
        if files.isEmpty {
            do {
                try decoder.decodeStream(read: { try Self.read(STDIN_FILENO, into: $0, name: "stdin") }, emit: emit)
            } catch let error as ReadError {
                failures.append(error.message)
            }
        } else {
            for name in files {
                let fd = open(name, O_RDONLY)
                if fd < 0 {
                    failures.append("cannot open \(name): \(String(cString: strerror(errno)))")
                    continue
                }
                defer { close(fd) }
                do {
                    // One decoder for all files: the counters add up; each file's end
                    // flushes the cycle in progress.
                    try decoder.decodeStream(read: { try Self.read(fd, into: $0, name: name) }, emit: emit)
                } catch let error as ReadError {
                    failures.append(error.message)
                }
            }
        }
        out.flush()
        let s = decoder.statistics
        var summary = "sentences \(s.sentences), fixes \(s.fixes), headings \(s.headings), "
        summary += "bad checksums \(s.badChecksums), missing checksums \(s.missingChecksums), "
        summary += "ignored \(s.ignored), framing errors \(s.framingErrors), binary frames \(s.binaryFrames)\n"
        for failure in failures { summary += "fleetcast-agent decode: \(failure)\n" }
        _ = summary.utf8CString.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
        if !failures.isEmpty { throw ExitCode(1) }
    }

    struct ReadError: Error { let message: String }

    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, name: String) throws -> Int {
        while true {
            let n = systemRead(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw ReadError(message: "cannot read \(name): \(String(cString: strerror(errno)))")
        }
    }
}

/// The C library's `read(2)`, named apart from `DecodeCommand.read`.
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}

/// A buffered writer for stdout: lines collect in memory and go out in large writes.
struct OutputBuffer {
    let fd: Int32
    var bytes: [UInt8] = []

    init(fd: Int32) {
        self.fd = fd
        bytes.reserveCapacity(1 << 16)
    }

    mutating func line(_ line: [UInt8]) {
        bytes.append(contentsOf: line)
        bytes.append(0x0A)
        if bytes.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let n = write(fd, base + offset, raw.count - offset)
                if n < 0 { if errno == EINTR { continue } else { break } }
                offset += n
            }
        }
        bytes.removeAll(keepingCapacity: true)
    }
}
