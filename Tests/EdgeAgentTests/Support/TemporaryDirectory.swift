#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh directory under /tmp, removed with everything in it by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/fleetcast-agent-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }
        path = made.map { String(cString: $0) } ?? "/tmp/fleetcast-agent-test-fallback-\(getpid())"
        if made == nil { mkdir(path, 0o700) }
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    @discardableResult
    func createFile(_ name: String, _ text: String, mode: mode_t = 0o644) -> String {
        let target = file(name)
        let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, mode)
        if fd >= 0 {
            let bytes = Array(text.utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        return target
    }

    func contents(_ name: String) -> String? {
        let fd = open(file(name), O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return n >= 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
    }

    func remove() {
        remove(path)
    }

    private func remove(_ target: String) {
        if let dir = opendir(target) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name == "." || name == ".." { continue }
                remove("\(target)/\(name)")
            }
            closedir(dir)
            rmdir(target)
        } else {
            unlink(target)
        }
    }
}
