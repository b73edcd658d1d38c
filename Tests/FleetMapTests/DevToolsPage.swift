import FleetcastTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
import Testing
#endif

/// One page of a headless Chromium started with `--remote-debugging-port`, driven through the
/// Chrome DevTools Protocol (`Runtime.evaluate`, or any method) over its WebSocket: a minimal RFC 6455 client
/// on a blocking loopback socket, every read bounded by a receive timeout, enough for
/// request/response over one connection (text frames, client frames masked, continuation
/// frames joined, server pings answered).
final class DevToolsPage {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let fd: Int32
    private var nextID = 0
    private var buffer: [UInt8] = []
    /// The page's script errors seen so far (``watchScriptErrors()``).
    private var errorsSeen: [String] = []

    /// Connects to `ws://127.0.0.1:port/path` (a page's `webSocketDebuggerUrl`).
    init(port: Int, path: String, timeoutSeconds: Int = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard FreePort.connectLoopback(fd, port: port) == 0 else {
            close(fd)
            throw Failure(description: "connect 127.0.0.1:\(port): errno \(errno)")
        }
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        try send(
            Array(
                "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
                    .utf8))
        var head: [UInt8] = []
        while !head.ends(with: Array("\r\n\r\n".utf8)) {
            head.append(try read(1)[0])
            guard head.count < 16_384 else { throw Failure(description: "handshake answer too long") }
        }
        let status = String(decoding: head, as: UTF8.self)
        guard status.hasPrefix("HTTP/1.1 101") else { throw Failure(description: "handshake refused: \(status.prefix(200))") }
    }

    deinit { close(fd) }

    /// Evaluates `expression` in the page and returns its value as JSON text (the expression
    /// should return a string, e.g. `JSON.stringify(…)`).
    func evaluate(_ expression: String) throws -> String {
        let (answer, message) = try call("Runtime.evaluate", ["expression": expression, "returnByValue": true])
        let result = (answer["result"] as? [String: Any])?["result"] as? [String: Any]
        if let exception = (answer["result"] as? [String: Any])?["exceptionDetails"] {
            throw Failure(description: "exception in the page: \(exception)")
        }
        guard let value = result?["value"] as? String else {
            throw Failure(description: "no string value: \(String(decoding: message, as: UTF8.self).prefix(500))")
        }
        return value
    }

    /// Starts collecting the page's script errors: uncaught exceptions (a syntax error in
    /// `map.js` among them), `console.error` and `console.assert`, and the console's errors from
    /// JavaScript and from the security policy (a script or style the page's CSP refuses). The
    /// browser reports what it collected before as well, so errors of the page's load count.
    func watchScriptErrors() throws {
        try call("Runtime.enable")
        try call("Log.enable")
    }

    /// The script errors the page reported since ``watchScriptErrors()``, up to now.
    func scriptErrors() throws -> [String] {
        try call("Runtime.evaluate", ["expression": "0"])  // everything reported before its answer is in
        return errorsSeen
    }

    /// Records the page's script errors, if any, as an issue of the running test: a test that
    /// fails for another reason (a wait that timed out) then says what broke the page.
    func recordScriptErrors(sourceLocation: SourceLocation = #_sourceLocation) {
        guard let errors = try? scriptErrors(), !errors.isEmpty else { return }
        Issue.record("the page's script reported errors: \(errors)", sourceLocation: sourceLocation)
    }

    /// Notes `event` if it reports a script error.
    private func note(_ event: [String: Any]) {
        let params = event["params"] as? [String: Any] ?? [:]
        switch event["method"] as? String {
        case "Runtime.exceptionThrown":
            let details = params["exceptionDetails"] as? [String: Any] ?? [:]
            let exception = (details["exception"] as? [String: Any])?["description"] as? String
            errorsSeen.append("exception: \(exception ?? details["text"] as? String ?? "?") at line \(details["lineNumber"] ?? "?")")
        case "Runtime.consoleAPICalled" where ["error", "assert"].contains(params["type"] as? String):
            let arguments = (params["args"] as? [[String: Any]] ?? []).map { "\($0["value"] ?? $0["description"] ?? "?")" }
            errorsSeen.append("console.\(params["type"] ?? ""): \(arguments.joined(separator: " "))")
        case "Log.entryAdded":
            let entry = params["entry"] as? [String: Any] ?? [:]
            if entry["level"] as? String == "error", ["javascript", "security"].contains(entry["source"] as? String) {
                errorsSeen.append("console (\(entry["source"] ?? "")): \(entry["text"] ?? "")")
            }
        default: break
        }
    }

    /// Calls the DevTools method `method` with `params` and returns its answer (the whole
    /// message, and its bytes); an `error` answer is thrown.
    @discardableResult
    func call(_ method: String, _ params: [String: Any] = [:]) throws -> (answer: [String: Any], message: [UInt8]) {
        nextID += 1
        let id = nextID
        let request: [String: Any] = ["id": id, "method": method, "params": params]
        try sendFrame(Array(try JSONSerialization.data(withJSONObject: request)))
        while true {
            let message = try receiveMessage()
            guard let object = try JSONSerialization.jsonObject(with: Data(message)) as? [String: Any] else { continue }
            guard object["id"] as? Int == id else {
                note(object)  // an event, or another answer
                continue
            }
            if let error = object["error"] { throw Failure(description: "\(method): \(error)") }
            return (object, message)
        }
    }

    private func sendFrame(_ payload: [UInt8], opcode: UInt8 = 0x1) throws {
        var frame: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count < 65_536 {
            frame.append(0x80 | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> ($0 * 8)) & 0xFF) }
        }
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        try send(frame)
    }

    /// One whole message (continuation frames joined); pings answered, pongs skipped.
    private func receiveMessage() throws -> [UInt8] {
        var message: [UInt8] = []
        while true {
            let header = try read(2)
            let opcode = header[0] & 0x0F
            var length = Int(header[1] & 0x7F)
            if length == 126 {
                let b = try read(2)
                length = Int(b[0]) << 8 | Int(b[1])
            } else if length == 127 {
                length = try read(8).reduce(0) { $0 << 8 | Int($1) }
            }
            guard length <= 64 << 20 else { throw Failure(description: "frame of \(length) bytes") }
            let masked = header[1] & 0x80 != 0
            let mask = masked ? try read(4) : []
            var payload = try read(length)
            if masked { payload = payload.enumerated().map { $0.element ^ mask[$0.offset % 4] } }
            switch opcode {
            case 0x8: throw Failure(description: "connection closed by the browser")
            case 0x9:
                try sendFrame(payload, opcode: 0xA)
                continue
            case 0xA: continue
            default: message += payload
            }
            if header[0] & 0x80 != 0 { return message }
        }
    }

    private func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send: errno \(errno)") }
            sent += n
        }
    }

    private func read(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw Failure(description: n == 0 ? "connection closed" : "recv: errno \(errno) (timed out?)") }
            buffer += chunk[..<n]
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
