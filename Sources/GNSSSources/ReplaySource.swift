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
        self.logger = logger.forSource(self.uri)
        self.backoff = backoff
        self.decoderOptions = decoderOptions
    }

    /// Starts a fresh playback from the beginning of the file.
    ///
    /// The stream is pulled: the file is read and decoded only as its consumer asks for events
    /// (one chunk's events at a time), so a consumer that waits (a batch upload waiting for
    /// the broker) holds the file back instead of buffering it in memory.
    public func makeEventStream() -> AsyncStream<GNSSEvent> {
        let playback = Playback(source: self)
        return AsyncStream(unfolding: { await playback.next() })
    }

    /// At full speed, a fresh playback as ``makeEventStream()`` starts one, handing over the
    /// events of a whole decoded chunk at once; `nil` when paced (events go one at a time, each
    /// when it is due).
    public func makeBatchStream() -> AsyncStream<[GNSSEvent]>? {
        guard case .max = speed else { return nil }
        let playback = Playback(source: self)
        return AsyncStream(unfolding: { await playback.nextBatch() })
    }

    /// One playback's position in the file, decoder and pacing; advanced by the stream's
    /// consumer, one call at a time.
    actor Playback {
        let source: ReplaySource
        private var reader: FileChunkReader?
        private var decoder: NMEADecoder
        private var pacer: Pacer
        private var pending: [GNSSEvent] = []
        private var pendingIndex = 0
        private var backoff: Backoff
        private var lastState: SourceState?
        private var ended = false
        /// The back-off to wait before trying to open the file again.
        private var waitBeforeRetry: Duration?

        init(source: ReplaySource) {
            self.source = source
            self.decoder = NMEADecoder(options: source.decoderOptions)
            self.pacer = Pacer(speed: source.speed)
            self.backoff = source.backoff
        }

        /// The next event; `nil` at the end (after `.state(.ended)`) or when the consuming
        /// task is cancelled, and (not `advancing`) once the decoded chunk is used up.
        func next(advancing: Bool = true) async -> GNSSEvent? {
            while !Task.isCancelled {
                if pendingIndex < pending.count {
                    let event = pending[pendingIndex]
                    pendingIndex += 1
                    switch event {
                    case .state(let state):
                        if let report = report(state) { return report }
                        continue
                    case .fix(let fix):
                        if let wait = pacer.delay(for: fix.time) {
                            do { try await Task.sleep(for: wait) } catch { return nil }
                        }
                        if let report = report(.streaming) {
                            pendingIndex -= 1  // the fix follows its state
                            return report
                        }
                        return event
                    case .heading:
                        return event
                    }
                }
                if ended || !advancing { return nil }
                if let wait = waitBeforeRetry {
                    waitBeforeRetry = nil
                    do { try await Task.sleep(for: wait) } catch { return nil }
                }
                if let event = await advance() { return event }
            }
            return nil
        }

        /// The next event and the rest of the decoded chunk with it, for a playback at full
        /// speed (nothing waits, nothing more is read); `nil` as ``next(advancing:)``.
        func nextBatch() async -> [GNSSEvent]? {
            guard let first = await next() else { return nil }
            var batch = [first]
            batch.reserveCapacity(pending.count - pendingIndex + 1)
            while let event = await next(advancing: false) { batch.append(event) }
            return batch
        }

        /// Reads and decodes the next chunk into `pending`; returns a state event to report
        /// first, if any.
        private func advance() async -> GNSSEvent? {
            pending.removeAll(keepingCapacity: true)
            pendingIndex = 0
            do {
                if reader == nil {
                    if let report = report(.connecting) { return report }
                    reader = try await FileChunkReader(path: source.path)
                    decoder = NMEADecoder(options: source.decoderOptions)
                }
                let chunk = try await reader!.next()
                if chunk.isEmpty {
                    decoder.finish { pending.append($0) }
                    source.logger.debug(
                        "Replay reached end of file",
                        metadata: [
                            "replay.path": "\(source.path)", "nmea.sentences": "\(decoder.statistics.sentences)",
                            "nmea.fixes": "\(decoder.statistics.fixes)",
                            "nmea.badChecksums": "\(decoder.statistics.badChecksums)",
                        ])
                    reader = nil
                    backoff.reset()
                    if source.loop {
                        source.logger.debug("Replay looping", metadata: ["replay.path": "\(source.path)"])
                    } else {
                        pending.append(.state(.ended))
                        ended = true
                    }
                } else {
                    chunk.withUnsafeBytes { bytes in decoder.decode(bytes) { pending.append($0) } }
                }
                return nil
            } catch {
                reader = nil
                if Task.isCancelled { return nil }
                source.logger.info("Cannot read recording", metadata: ["replay.path": "\(source.path)", "error": "\(error)"])
                let delay = backoff.next()
                let report = report(.reconnecting(reason: "\(error)", delay: delay))
                // Report first; the wait happens on the next call.
                waitBeforeRetry = delay
                return report
            }
        }

        /// `.state(state)` when it differs from the last reported one.
        private func report(_ state: SourceState) -> GNSSEvent? {
            guard lastState != state else { return nil }
            lastState = state
            return .state(state)
        }
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
