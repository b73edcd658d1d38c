/// A recording with its `*hh` checksums removed: a receiver that sends none.
public func withoutChecksums(_ bytes: [UInt8]) -> [UInt8] {
    let text = String(decoding: bytes, as: UTF8.self)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
        guard line.hasPrefix("$"), let star = line.lastIndex(of: "*") else { return line }
        return line[..<star]
    }
    return Array(lines.joined(separator: "\n").utf8)
}
