import FleetHistory
import FleetHistoryCore
import FleetcastTestSupport
import Foundation
import Testing

/// Where fleet-watch takes the PostgreSQL password from: never the URL (every user of the
/// machine can read a command line), but `--postgres-password-file`, `PGPASSWORD` or a libpq
/// password file (`PGPASSFILE`). The same rules in `record`, `history`, `gaps` and
/// `serve --postgres`; real PostgreSQL with a password (SCRAM) and the built `fleet-watch`.
@Suite struct PostgresPasswordTests {
    static let secret = "s3cr3t-Pg-Pa55"

    @Test(arguments: [
        ["gaps"],
        ["history", "--vehicle", "van-7"],
        ["record", "--broker", "mqtt://127.0.0.1:1"],
        ["serve", "--broker", "mqtt://127.0.0.1:1"],
    ])
    func aPasswordInThePostgresURLIsRefusedAtOnceAndNeverPrinted(_ command: [String]) async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-pg-url-password")
        defer { directory.remove() }
        let url = "postgres://fleet:\(Self.secret)@127.0.0.1:1/fleet?sslmode=disable"
        let process = try TestProcess(
            builtProduct("fleet-watch"), command + ["--postgres", url], directory: directory.path, name: command[0])
        let status = try await process.waitForExit(timeout: .seconds(10))
        let output = process.standardOutput + process.standardError
        #expect(status == 64, "\(command[0]) refused it as a usage error, before connecting: \(output)")
        #expect(!output.contains(Self.secret), "\(command[0]) printed the password: \(output)")
        #expect(output.contains("postgres://fleet:<redacted>@127.0.0.1:1/fleet"), "\(output)")
        let words = output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(words.contains("a password does not belong in the URL"), "\(output)")
        for way in ["PGPASSWORD", "secrets file", "--postgres-password-file", "PGPASSFILE"] {
            #expect(words.contains(way), "\(command[0]) names \(way): \(output)")
        }
    }

    @Test func passFileLinesMatchAsLibpqsDo() throws {
        let file = PostgresPassFile(
            parsing: Array(
                """
                # comment: db.example.net:5432:fleet:rec:nope
                db.example.net:5432:fleet:rec:first
                db.example.net:5432:fleet:rec:second
                *:*:tracks:*:any\\:one\\\\x:ignored after an unescaped colon
                db\\:odd:6543:*:rec:odd host\r
                \\*:5432:fleet:rec:literal star
                too:few:fields

                """.utf8))
        func password(_ url: String) throws -> String? { file.password(for: try PostgresLocation(parsing: url)) }
        #expect(file.entries.count == 5)
        #expect(try password("postgres://rec@db.example.net/fleet") == "first", "the first line that matches wins; 5432 by default")
        #expect(try password("postgres://rec@db.example.net:5433/fleet") == nil, "another port")
        #expect(try password("postgres://other@db.example.net/fleet") == nil, "another user")
        #expect(try password("postgres://anyone@elsewhere:1/tracks") == "any:one\\x", "wildcards; \\: and \\\\ unescaped")
        #expect(file.entries[3] == .init(hostname: "db:odd", port: "6543", database: nil, username: "rec", password: "odd host"))
        #expect(file.entries[4].hostname == "*", "\\* is a star, not a wildcard")
    }

    /// `gaps` on a migrated, empty database with `--postgres` (no password) and `extra`
    /// options, in `environment`: its status and output.
    static func gaps(
        _ postgres: TestPostgres, _ database: String, extra: [String] = [], environment: [String: String],
        in directory: TemporaryDirectory
    ) async throws -> (Int32, String) {
        let url = "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable"
        // No password but the one given here: not the runner's, not its ~/.pgpass (an empty
        // PGPASSWORD or PGPASSFILE counts as not set, as with libpq).
        let process = try TestProcess(
            builtProduct("fleet-watch"), ["gaps", "--postgres", url, "--connect-timeout", "4"] + extra,
            directory: directory.path, name: "gaps-\(UUID().uuidString)",
            environment: ["PGPASSWORD": "", "PGPASSFILE": directory.file("none"), "HOME": directory.path].merging(environment) { $1 })
        let status = try await process.waitForExit(timeout: .seconds(60))
        return (status, process.standardOutput + process.standardError)
    }

    @Test func thePasswordComesFromAFileTheEnvironmentOrAPassFile() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-pg-password")
        defer { directory.remove() }
        try await withPostgres { postgres in
            let password = try #require(postgres.password)
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database) { store, _ in try await store.migrate() }
            let complete = "complete: 0 messages of 0 vehicles in 0 numbering runs, none missing"

            // --postgres-password-file: its first line; a line end (CRLF too) is not part of it.
            let passwordFile = try directory.createFile("pg-password", "\(password)\r\nsecond line\n", mode: 0o600)
            var (status, output) = try await Self.gaps(
                postgres, database, extra: ["--postgres-password-file", passwordFile], environment: [:], in: directory)
            #expect(status == 0 && output.contains(complete), "\(output)")
            #expect(!output.contains(password))

            // It wins over PGPASSWORD.
            (status, output) = try await Self.gaps(
                postgres, database, extra: ["--postgres-password-file", passwordFile], environment: ["PGPASSWORD": "wrong"],
                in: directory)
            #expect(status == 0, "\(output)")

            // A missing one is a usage error naming it.
            (status, output) = try await Self.gaps(
                postgres, database, extra: ["--postgres-password-file", directory.file("missing")], environment: [:], in: directory)
            #expect(status == 64 && output.contains("cannot read --postgres-password-file \(directory.file("missing"))"), "\(output)")

            // PGPASSWORD, as before.
            (status, output) = try await Self.gaps(postgres, database, environment: ["PGPASSWORD": password], in: directory)
            #expect(status == 0, "\(output)")

            // PGPASSFILE, libpq's format: the first line that matches wins.
            let escaped = password.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ":", with: "\\:")
            let passFile = try directory.createFile(
                "pgpass",
                """
                # fleet-watch reads what psql reads
                127.0.0.1:\(postgres.port):other_db:\(postgres.user):wrong
                *:\(postgres.port):\(database):*:\(escaped)
                *:*:*:*:wrong

                """, mode: 0o600)
            (status, output) = try await Self.gaps(postgres, database, environment: ["PGPASSFILE": passFile], in: directory)
            #expect(status == 0 && output.contains(complete), "\(output)")

            // ~/.pgpass when PGPASSFILE is not set.
            try FileManager.default.copyItem(atPath: passFile, toPath: directory.file(".pgpass"))
            (status, output) = try await Self.gaps(postgres, database, environment: ["PGPASSFILE": ""], in: directory)
            #expect(status == 0, "\(output)")

            // A pass file its group or others may read is not used, as libpq would not: a warning,
            // and the server refuses the connection without a password.
            #expect(chmod(passFile, 0o640) == 0)
            (status, output) = try await Self.gaps(postgres, database, environment: ["PGPASSFILE": passFile], in: directory)
            #expect(status == 2, "\(output)")
            #expect(output.contains("The PostgreSQL password file is not used, as libpq would not use it"), "\(output)")
            #expect(output.contains("group or others have access to it; permissions should be u=rw (0600) or less"), "\(output)")
            #expect(!output.contains(password))
        }
    }
}
