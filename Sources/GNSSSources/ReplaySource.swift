import FleetcastCore
import GNSS
import Logging
import NMEA

/// A recorded NMEA file played back as a receiver (`replay:PATH?speed=N|max&loop=true`).
///
/// The file is read in chunks and decoded with `NMEADecoder`. With a speed factor, fixes
/// are released at the pace of the receiver's own clock: a fix stamped `t` is delivered
/// `(t − t₀) / speed` after the first fix `t₀` (headings and states go with the fix before
/// them). With `max` nothing waits. At the end of the file the source reports
/// `.state(.ended)` and finishes, or starts over when looping. A file that cannot be read
/// is reported as `.reconnecting` naming the path and errno and retried (it may appear).
public struct ReplaySource: GNSSSource {
    public typealias Element = GNSSEvent
    public typealias Failure = Never

    /// The recording's path.
    public let path: String
    /// Playback speed.
    public let speed: ReplaySpeed
    /// Start over at the end instead of ending.
    public let loop: Bool
    /// The URI for logs.
    public let uri: String
    /// Decoder settings for the recording's sentences.
    public let decoderOptions: NMEADecoder.Options
    private let logger: Logger
    private let backoff: Backoff

    /// A replay source; the file is opened when iteration starts.
    public init(
        path: String, speed: ReplaySpeed = .factor(1), loop: Bool = false, uri: String? = nil, logger: Logger,
        backoff: Backoff = .default, decoderOptions: NMEADecoder.Options = .init()
    ) {
        self.path = path
        self.speed = speed
        self.loop = loop
        self.uri = uri ?? GNSSSourceDescriptor.replay(path: path, speed: speed, loop: loop).uri
        var logger = logger
        logger[metadataKey: "gnss.source"] = "\(self.uri)"
        self.logger = logger
        self.backoff = backoff
        self.decoderOptions = decoderOptions
    }

    /// Starts a fresh playback from the beginning of the file.
    public func makeEventStream() -> AsyncStream<GNSSEvent> {
        let source = self
        return EventStream.run { sink in
            var backoff = source.backoff
            while !Task.isCancelled {
                sink.state(.connecting)
                do {
                    try await source.playOnce(sink: sink)
                    backoff.reset()
                    if Task.isCancelled { return }
                    if !source.loop {
                        sink.state(.ended)
                        return
                    }
                    source.logger.debug("Replay looping", metadata: ["replay.path": "\(source.path)"])
                } catch is CancellationError {
                    return
                } catch {
                    if Task.isCancelled { return }
                    source.logger.info("Cannot read recording", metadata: ["replay.path": "\(source.path)", "error": "\(error)"])
                    let delay = backoff.next()
                    sink.state(.reconnecting(reason: "\(error)", delay: delay))
                    do { try await Task.sleep(for: delay) } catch { return }
                }
            }
        }
    }

    /// Plays the file once, pacing fixes by their time stamps.
    private func playOnce(sink: EventSink) async throws {
        let reader = try await FileChunkReader(path: path)
        var decoder = NMEADecoder(options: decoderOptions)
        var pacer = Pacer(speed: speed)
        var pending: [GNSSEvent] = []
        while true {
            try Task.checkCancellation()
            let chunk = try await reader.next()
            pending.removeAll(keepingCapacity: true)
            if chunk.isEmpty {
                decoder.finish { pending.append($0) }
            } else {
                chunk.withUnsafeBytes { bytes in
                    decoder.decode(bytes) { pending.append($0) }
                }
            }
            for event in pending {
                if case .fix(let fix) = event, let wait = pacer.delay(for: fix.time) {
                    try await Task.sleep(for: wait)
                }
                sink.event(event)
            }
            if chunk.isEmpty { break }
        }
        logger.debug("Replay reached end of file", metadata: [
            "replay.path": "\(path)", "nmea.sentences": "\(decoder.statistics.sentences)",
            "nmea.fixes": "\(decoder.statistics.fixes)", "nmea.badChecksums": "\(decoder.statistics.badChecksums)",
        ])
    }

    /// Maps receiver time to wall-clock time for paced playback.
    struct Pacer {
        let speed: ReplaySpeed
        private var anchor: (receiver: UTCTimestamp, wall: ContinuousClock.Instant)?

        init(speed: ReplaySpeed) {
            self.speed = speed
        }

        /// How long to wait before delivering a fix stamped `time`; `nil` for no wait.
        mutating func delay(for time: UTCTimestamp) -> Duration? {
            guard case .factor(let factor) = speed else { return nil }
            let now = ContinuousClock.now
            guard let anchor, time >= anchor.receiver else {
                // First fix, or the recording's clock went backwards (a new session): re-anchor.
                self.anchor = (time, now)
                return nil
            }
            let elapsedMs = Double(time.millisecondsSince1970 - anchor.receiver.millisecondsSince1970) / factor
            let due = anchor.wall.advanced(by: .milliseconds(Int64(elapsedMs.rounded())))
            return due > now ? now.duration(to: due) : nil
        }
    }
}
