import EdgeAgent
import Foundation
import Testing

@Suite struct StartupPagesTests {
    /// `RssFile` of this process (`/proc/self/status`): the pages of files it maps, in kB.
    private func residentFilePages() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("RssFile:") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    private protocol Named { var name: String { get } }
    private struct Vehicle: Named, Codable, Equatable { var name: String; var speeds: [Double] }

    @Test("the pages of code and constant data go back, and the process goes on as before: casts, generics, formatting, JSON")
    func releaseKeepsTheProcessWhole() throws {
        let before = try residentFilePages()
        let advised = StartupPages.release()
        let after = try residentFilePages()
        // This test binary's own code is tens of MB, most of it resident after the suite's start.
        #expect(advised > 1 << 20, "advised \(advised) bytes")
        #expect(after < before, "RssFile \(before) kB before, \(after) kB after")

        // Everything below runs code and reads constant data mapped again after the release,
        // and relocated data (type metadata, witness tables, vtables) that it must not lose.
        let values: [Any] = [Vehicle(name: "van-7", speeds: [1.5, 2.25]), 42, "text"]
        #expect(values.compactMap { ($0 as? any Named)?.name } == ["van-7"])
        #expect(String(describing: type(of: values[0])).hasSuffix("Vehicle"))
        #expect(String(format: "%.3f", 2.0 / 3.0) == "0.667")
        let vehicle = Vehicle(name: "van-7", speeds: [1.5, 2.25])
        let decoded = try JSONDecoder().decode(Vehicle.self, from: try JSONEncoder().encode(vehicle))
        #expect(decoded == vehicle)
        #expect(Set((0..<1000).map { $0 % 7 }).count == 7)
        // A second release (nothing new to give back but what ran since) is as harmless.
        #expect(StartupPages.release() > 0)
        #expect(Dictionary(grouping: ["a", "bb", "cc"], by: \.count) == [1: ["a"], 2: ["bb", "cc"]])
    }
}
