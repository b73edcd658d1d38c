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
    /// as `product:Name`), and which targets are C (system libraries and C-only targets): the
    /// manifest as SwiftPM reads it (`swift package dump-package`, every part declared), since
    /// it is code (named product dependencies, parts chosen by FLEETCAST_TIER).
    struct Manifest {
        var dependencies: [String: [String]] = [:]
        var cTargets: Set<String> = []

        init(dump: Data, sources: URL) throws {
            let object = try JSONSerialization.jsonObject(with: dump) as? [String: Any]
            for target in object?["targets"] as? [[String: Any]] ?? [] {
                guard let name = target["name"] as? String else { continue }
                var found: [String] = []
                for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
                    if let product = dependency["product"] as? [Any], let productName = product.first as? String {
                        found.append("product:" + productName)
                    } else if let named = (dependency["byName"] ?? dependency["target"]) as? [Any], let targetName = named.first as? String
                    {
                        found.append(targetName)
                    }
                }
                dependencies[name] = found
                let folder = sources.appendingPathComponent(name)
                let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
                let kind = target["type"] as? String
                if kind == "system" || (kind == "regular" && !files.isEmpty && !files.contains { $0.hasSuffix(".swift") }) {
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
        // A scratch folder of its own: the test command's build holds the package's own.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fleetcast-dump-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--package-path", root.path, "--scratch-path", scratch.path, "dump-package"]
        var environment = ProcessInfo.processInfo.environment
        environment["FLEETCAST_TIER"] = ""  // every part
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let dump = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "swift package dump-package failed"])
        }
        return try Manifest(dump: dump, sources: root.appendingPathComponent("Sources"))
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
        let cores = [
            "GNSS", "JSONEscaping", "NMEA", "FleetProtocol", "MQTTCore", "OutboxCore", "EdgeCore", "FleetCore", "FleetOperations",
            "FleetHistoryCore",
        ]
        for core in cores {
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
