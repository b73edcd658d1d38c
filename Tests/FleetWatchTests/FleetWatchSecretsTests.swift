import FleetcastTestSupport
import Foundation
import Testing

/// fleet-watch given a password in a URL: a clear error, and the password in no line of output.
@Suite struct FleetWatchSecretsTests {
    static let password = "s3cr3t-Pa55"

    @Test(arguments: [
        ["watch", "--broker", "mqtts://dispatch:\(password)@broker.example.net"],
        ["record", "--broker", "mqtt://rec:\(password)@127.0.0.1:1", "--postgres", "postgres://fleet@127.0.0.1:1/fleet"],
        ["history", "--postgres", "postgres://fleet:\(password)@127.0.0.1:1/fleet?sslmode=bogus", "--vehicle", "van-7"],
    ])
    func aPasswordInAURLIsRefusedAndNeverPrinted(_ arguments: [String]) async throws {
        let work = try makeTemporaryDirectory(prefix: "fleet-watch-secret")
        let process = try TestProcess(FleetWatchCLITests.executable, arguments, directory: work, name: "fleet-watch")
        let status = try await process.waitForExit(timeout: .seconds(30))
        let output = process.standardOutput + process.standardError
        #expect(status != 0, "\(arguments[0]) refused it: \(output)")
        if arguments.contains(where: { $0.hasPrefix("mqtt") }) {
            #expect(output.contains("a password does not belong in the URL"), "\(arguments[0]) says why: \(output)")
        }
        #expect(!output.contains(Self.password), "\(arguments[0]) printed the password: \(output)")
    }
}
