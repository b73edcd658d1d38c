import FleetcastTestSupport
import Foundation
import Testing

/// The package's shape as issue 33 asks for it, read from `Package.swift` and the source tree:
/// the pure cores reach no C target and no I/O package, the edge's outbox does not depend on
/// the MQTT client nor its configuration on the publisher, no file or module grows past what a
/// reader takes in, and the tests wait for events rather than for time.
@Suite struct ModuleBoundariesTests {
    static let root = URL(fileURLWithPath: RepositoryPath.of("."))

    /// Each target of `Package.swift` with its direct dependencies (targets by name, products
    /// as `product:Name`), and which targets are C (system libraries and C-only targets).
    struct Manifest {
        var dependencies: [String: [String]] = [:]
        var cTargets: Set<String> = []

        init(text: String, sources: URL) throws {
            let declaration = try Regex(#"\.(target|systemLibrary|executableTarget|testTarget)\(\s*name:\s*"([A-Za-z0-9_-]+)""#)
            let matches = text.matches(of: declaration)
            for (index, match) in matches.enumerated() {
                let kind = String(match.output[1].substring ?? "")
                let name = String(match.output[2].substring ?? "")
                let end = index + 1 < matches.count ? matches[index + 1].range.lowerBound : text.endIndex
                let body = text[match.range.upperBound..<end]
                var found: [String] = []
                if let list = body.firstRange(of: "dependencies: [") {
                    var depth = 1
                    var cursor = list.upperBound
                    while cursor < body.endIndex, depth > 0 {
                        if body[cursor] == "[" { depth += 1 } else if body[cursor] == "]" { depth -= 1 }
                        cursor = body.index(after: cursor)
                    }
                    let entries = body[list.upperBound..<cursor]
                    for product in entries.matches(of: try Regex(#"\.product\(name:\s*"([A-Za-z0-9_-]+)""#)) {
                        found.append("product:" + String(product.output[1].substring ?? ""))
                    }
                    let withoutProducts = entries.replacing(try Regex(#"\.product\([^)]*\)"#), with: "")
                    for target in withoutProducts.matches(of: try Regex(#""([A-Za-z0-9_-]+)""#)) {
                        found.append(String(target.output[1].substring ?? ""))
                    }
                }
                dependencies[name] = found
                let folder = sources.appendingPathComponent(name)
                let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
                if kind == "systemLibrary" || (kind == "target" && !files.isEmpty && !files.contains { $0.hasSuffix(".swift") }) {
                    cTargets.insert(name)
                }
            }
        }

        /// Every target and product `name` reaches.
        func closure(of name: String) -> Set<String> {
            var seen: Set<String> = []
            var stack = dependencies[name] ?? []
            while let next = stack.popLast() {
                guard seen.insert(next).inserted else { continue }
                stack += dependencies[next] ?? []
            }
            return seen
        }
    }

    static func manifest() throws -> Manifest {
        let text = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        return try Manifest(text: text, sources: root.appendingPathComponent("Sources"))
    }

    /// Packages that do I/O (sockets, files, processes, databases, HTTP) or need a C library.
    static let ioProducts: Set<String> = [
        "product:NIOCore", "product:NIOPosix", "product:SQLiteNIO", "product:PostgresNIO", "product:Hummingbird",
        "product:HummingbirdCore", "product:HummingbirdTLS", "product:ServiceLifecycle", "product:Configuration",
        "product:AsyncAlgorithms", "product:ArgumentParser",
    ]

    @Test("the pure cores reach no C target and no I/O package; FleetProtocol reaches only GNSS and JSONEscaping")
    func pureCoresArePure() throws {
        let manifest = try Self.manifest()
        #expect(manifest.cTargets.isSuperset(of: ["CMosquitto", "CYAML", "CTimex", "CLoadedCode", "CTCPTraffic"]), "\(manifest.cTargets)")
        for core in ["GNSS", "JSONEscaping", "NMEA", "FleetProtocol", "MQTTCore", "EdgeCore", "FleetCore", "FleetOperations"] {
            #expect(manifest.dependencies[core] != nil, "\(core) is a target")
            let reached = manifest.closure(of: core)
            #expect(reached.isDisjoint(with: manifest.cTargets), "\(core) reaches \(reached.intersection(manifest.cTargets))")
            #expect(reached.isDisjoint(with: Self.ioProducts), "\(core) reaches \(reached.intersection(Self.ioProducts))")
        }
        #expect(manifest.closure(of: "FleetProtocol") == ["GNSS", "JSONEscaping"])
    }

    @Test("the outbox does not depend on the MQTT client, nor the configuration on the publisher")
    func edgeDependenciesPointInward() throws {
        let manifest = try Self.manifest()
        #expect(!manifest.closure(of: "EdgeOutbox").contains("MQTT"))
        #expect(!manifest.closure(of: "EdgeOutbox").contains("CMosquitto"))
        #expect(!manifest.closure(of: "EdgeConfiguration").contains("EdgePublisher"))
        #expect(!manifest.closure(of: "EdgeConfiguration").contains("MQTT"))
        #expect(manifest.closure(of: "EdgePublisher").contains("EdgeCore"), "the shell is around its core")
    }

    /// Swift files below `folder`, with their line counts.
    static func swiftFiles(in folder: String) throws -> [(path: String, lines: Int)] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { return [] }
        var files: [(String, Int)] = []
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            let text = try String(contentsOf: base.appendingPathComponent(relative), encoding: .utf8)
            files.append((folder + "/" + relative, text.split(separator: "\n", omittingEmptySubsequences: false).count - 1))
        }
        return files
    }

    @Test("no source file over 800 lines and no module over 3,000")
    func filesAndModulesStayReadable() throws {
        let files = try Self.swiftFiles(in: "Sources")
        #expect(files.count > 100, "the tree was read")
        for file in files { #expect(file.lines <= 800, "\(file.path): \(file.lines) lines") }
        let modules = Dictionary(grouping: files) { $0.path.split(separator: "/")[1] }.mapValues { $0.reduce(0) { $0 + $1.lines } }
        for (module, lines) in modules { #expect(lines <= 3_000, "\(module): \(lines) lines") }
    }

    @Test("the publisher is a thin driver of the edge state: at most 400 lines (settings aside), and no lock of its own")
    func publisherIsAThinDriver() throws {
        let driver = try Self.swiftFiles(in: "Sources/EdgePublisher").filter {
            $0.path.hasSuffix("/Publisher.swift") || ($0.path.contains("/Publisher+") && !$0.path.hasSuffix("+Settings.swift"))
        }
        #expect(driver.count >= 2, "Publisher.swift and its backlog drive")
        let lines = driver.reduce(0) { $0 + $1.lines }
        #expect(lines <= 400, "\(lines) lines: \(driver.map(\.path))")
        for file in driver {
            let text = try String(contentsOf: Self.root.appendingPathComponent(file.path), encoding: .utf8)
            #expect(!text.contains("SanitizerVisibleMutex"), "\(file.path): decisions are taken under the edge state's one lock")
        }
    }

    @Test("the tests sleep at most 15 times: they wait for what happens, not for time")
    func testsDoNotSleep() throws {
        let call = "Task." + "sleep("  // spelled apart, so that this file does not count itself
        var count = 0
        for file in try Self.swiftFiles(in: "Tests") {
            let text = try String(contentsOf: Self.root.appendingPathComponent(file.path), encoding: .utf8)
            count += text.components(separatedBy: call).count - 1
        }
        #expect(count > 0 && count <= 15, "\(count) calls")
    }
}
