import Configuration

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension LibYAMLSnapshot {
    /// Reads and parses the YAML file at `path`, never holding more than ``maximumBytes`` (+1)
    /// of it in memory.
    ///
    /// swift-configuration's `FileProvider` reads a whole file before the snapshot sees its
    /// size: a 600 MB file (sparse, so it costs no disk) took 634 MB, an OOM kill under the
    /// agent unit's `MemoryMax=64M`. Here the file is opened once, its size taken with `fstat`
    /// on that descriptor (not a `stat` of the path, which another file could replace between
    /// the two), and a regular file over the limit is refused unread; whatever the file is
    /// (a pipe has no size), at most one byte over the limit is read, so one that grows
    /// meanwhile is refused too.
    ///
    /// - Throws: ``Failure``: the file cannot be opened or read (the system's reason), it is
    ///   too large (its size and the limit), or it is not YAML the agent takes.
    public init(contentsOf path: String, parsingOptions: ParsingOptions) throws(Failure) {
        let bytes = try Self.boundedContents(of: path)
        try self.init(bytes: bytes, parsingOptions: parsingOptions)
    }

    /// Parses `bytes` as ``init(data:providerName:parsingOptions:)`` does.
    private init(bytes: [UInt8], parsingOptions: ParsingOptions) throws(Failure) {
        do {
            try self.init(data: bytes.span.bytes, providerName: "FileProvider<LibYAMLSnapshot>", parsingOptions: parsingOptions)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure("\(error)")
        }
    }

    /// The bytes of the file at `path`, at most ``maximumBytes`` of them; see
    /// ``init(contentsOf:parsingOptions:)``.
    static func boundedContents(of path: String) throws(Failure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else { throw Failure(String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Failure(String(cString: strerror(errno))) }
        if info.st_mode & S_IFMT == S_IFREG, info.st_size > maximumBytes {
            throw tooLarge("it has \(info.st_size) bytes")
        }
        // A regular file's size (or a little for a pipe), plus the byte that tells it grew.
        let expected = info.st_mode & S_IFMT == S_IFREG ? Int(info.st_size) : 0
        var contents: [UInt8] = []
        contents.reserveCapacity(expected + 1)
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while contents.count <= maximumBytes {
            let wanted = min(buffer.count, maximumBytes + 1 - contents.count)
            let count = buffer.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, wanted) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure(String(cString: strerror(errno)))
            }
            if count == 0 { break }
            contents.append(contentsOf: buffer[..<count])
        }
        guard contents.count <= maximumBytes else { throw tooLarge("it has more than \(maximumBytes) bytes") }
        return contents
    }

    /// The file is over ``maximumBytes``: `what` says by how much.
    private static func tooLarge(_ what: String) -> Failure {
        Failure("\(what), more than the \(maximumBytes) (1 MiB) a configuration file may have; it was not read")
    }
}

/// The file read once, as a provider for `ConfigReader`: it never changes, so a watch sees its
/// values once (as `FileProvider`'s does).
extension LibYAMLSnapshot: ConfigProvider {
    /// The value of `key`, as ``value(forKey:type:)`` gives it.
    public func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    /// The value of `key`, once.
    nonisolated(nonsending) public func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    /// This snapshot.
    public func snapshot() -> any ConfigSnapshot { self }

    /// This snapshot, once.
    nonisolated(nonsending) public func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchSnapshotFromSnapshot(updatesHandler: updatesHandler)
    }
}

/// read(2), under a name the snapshot's own members do not shadow.
private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
