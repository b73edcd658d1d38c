import FleetcastTestSupport
import Foundation
import Testing

/// The README and the pages of `docs/`: every relative link names a file that exists and, with
/// a `#fragment`, a heading of that file (GitHub's anchors: lower case, punctuation dropped,
/// spaces as hyphens). A section moved to another page without its links is a failure here.
@Suite struct DocumentationLinksTests {
    /// The repository (found from this file).
    static let root = URL(fileURLWithPath: RepositoryPath.of("."))

    /// GitHub's anchor of a heading's text.
    static func anchor(_ heading: String) -> String {
        let kept = heading.trimmingCharacters(in: .whitespaces).lowercased().unicodeScalars.filter {
            CharacterSet.alphanumerics.contains($0) || $0 == "_" || $0 == "-" || $0 == " "
        }
        return String(String.UnicodeScalarView(kept)).replacingOccurrences(of: " ", with: "-")
    }

    /// The lines of a Markdown file outside code fences.
    static func prose(_ url: URL) throws -> [String] {
        var inFence = false
        var lines: [String] = []
        for line in try String(contentsOf: url, encoding: .utf8).components(separatedBy: "\n") {
            if line.hasPrefix("```") {
                inFence.toggle()
            } else if !inFence {
                lines.append(line)
            }
        }
        return lines
    }

    static func anchors(_ url: URL) throws -> Set<String> {
        Set(
            try prose(url).compactMap { line in
                guard let match = line.firstMatch(of: /^#{1,6} (.*)$/) else { return nil }
                return anchor(String(match.1))
            })
    }

    @Test func everyLinkOfTheReadmeAndTheDocsResolves() throws {
        let docs = Self.root.appendingPathComponent("docs")
        let pages = try FileManager.default.contentsOfDirectory(atPath: docs.path).filter { $0.hasSuffix(".md") }.sorted()
        #expect(pages.count >= 5, "the README's subjects have their pages: \(pages)")
        let readme = Self.root.appendingPathComponent("README.md")
        let readmeLines = try String(contentsOf: readme, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(readmeLines <= 400, "the README is a front door: \(readmeLines) lines")
        var checked = 0
        for file in [readme] + pages.map({ docs.appendingPathComponent($0) }) {
            for (number, line) in try Self.prose(file).enumerated() {
                for match in line.matches(of: /\]\(([^)\s]+)\)/) {
                    let target = String(match.1)
                    if target.firstMatch(of: /^[a-z]+:/) != nil { continue }  // https:, mailto:
                    let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                    let path = String(parts[0])
                    let linked = path.isEmpty ? file : file.deletingLastPathComponent().appendingPathComponent(path).standardizedFileURL
                    checked += 1
                    #expect(
                        FileManager.default.fileExists(atPath: linked.path),
                        "\(file.lastPathComponent):\(number + 1): \(target) names no file")
                    if parts.count == 2, linked.pathExtension == "md", FileManager.default.fileExists(atPath: linked.path) {
                        #expect(
                            try Self.anchors(linked).contains(String(parts[1])),
                            "\(file.lastPathComponent):\(number + 1): \(target) names no heading of \(linked.lastPathComponent)")
                    }
                }
            }
        }
        #expect(checked > 20, "the links were found: \(checked)")
    }
}
