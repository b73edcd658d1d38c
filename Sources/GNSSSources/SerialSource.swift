import FleetcastCore
import GNSS
import Logging
import NIOCore
import NIOPosix
import NMEA

/// A GNSS receiver on a serial line (`serial:PATH?baud=N`), decoded as NMEA 0183.
///
/// Opens the device raw 8N1 at the given baud rate and feeds every byte through an
/// `NMEADecoder`. When the device goes away (USB unplugged: the read fails with EIO or
/// returns end of file, and reopening fails with ENOENT) it logs the path and errno,
/// reports `.reconnecting(reason:delay:)` and reopens it with ``Backoff`` until it is
/// back — the stream goes on, the agent is not restarted.
///
/// The tty descriptor is handed to swift-nio (`NIOPipeBootstrap`, which documents serial
/// lines as a use) and read through an `NIOAsyncChannel`, so no thread blocks in `read`
/// and cancelling the iteration closes the descriptor.
public struct SerialSource: GNSSSource {
    public typealias Element = GNSSEvent
    public typealias Failure = Never

    /// The device path, such as `/dev/ttyUSB0` or `/dev/serial/by-id/…`.
    public let path: String
    /// Line speed, bits per second (one of ``GNSSSourceDescriptor/standardBaudRates``).
    public let baud: Int
    /// The URI for logs.
    public let uri: String
    /// Decoder settings for the receiver's sentences.
    public let decoderOptions: NMEADecoder.Options
    private let logger: Logger
    private let backoff: Backoff

    /// A serial source; nothing is opened until iteration starts.
    public init(
        path: String, baud: Int, uri: String? = nil, logger: Logger, backoff: Backoff = .default,
        decoderOptions: NMEADecoder.Options = .init()
    ) {
        self.path = path
        self.baud = baud
        self.uri = uri ?? GNSSSourceDescriptor.serial(path: path, baud: baud).uri
        self.logger = logger.forSource(self.uri)
        self.backoff = backoff
        self.decoderOptions = decoderOptions
    }

    /// Starts a fresh run: open, read, decode, reopen after loss, until cancelled.
    public func makeEventStream() -> AsyncStream<GNSSEvent> {
        let path = path, baud = baud, logger = logger, initialBackoff = backoff, options = decoderOptions
        return EventStream.reconnecting(backoff: initialBackoff) { sink, backoff in
            do {
                let fd = try SerialPort.openRaw(path: path, baud: baud)
                logger.debug("Serial device opened", metadata: ["serial.path": "\(path)", "serial.baud": "\(baud)"])
                return await Self.read(fd: fd, path: path, options: options, sink: sink, logger: logger, backoff: &backoff)
            } catch {
                logger.debug("Cannot open serial device", metadata: ["serial.path": "\(path)", "error": "\(error)"])
                return "\(error)"
            }
        }
    }

    /// Reads and decodes until the device is lost or the task cancelled; returns why it stopped.
    private static func read(
        fd: Int32, path: String, options: NMEADecoder.Options, sink: EventSink, logger: Logger,
        backoff: inout Backoff
    ) async -> String {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .takingOwnershipOfDescriptor(input: fd) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            // A failed bootstrap leaves the descriptor with us.
            close(fd)
            logger.info("Cannot watch serial device", metadata: ["serial.path": "\(path)", "error": "\(error)"])
            return "\(path): \(error)"
        }
        var decoder = NMEADecoder(options: options)
        var receivedData = false
        do {
            try await channel.executeThenClose { inbound, _ in
                for try await buffer in inbound {
                    if !receivedData {
                        receivedData = true
                        backoff.reset()
                    }
                    buffer.withUnsafeReadableBytes { bytes in
                        decoder.decode(bytes) { sink.event($0) }
                    }
                }
            }
        } catch let error as IOError {
            if Task.isCancelled { return "cancelled" }
            logger.info(
                "Serial device lost",
                metadata: ["serial.path": "\(path)", "errno": "\(error.errnoCode)", "error": "\(errnoText(error.errnoCode))"])
            return "\(path): \(errnoText(error.errnoCode)) (errno \(error.errnoCode))"
        } catch {
            if Task.isCancelled { return "cancelled" }
            logger.info("Serial device lost", metadata: ["serial.path": "\(path)", "error": "\(error)"])
            return "\(path): \(error)"
        }
        decoder.finish { sink.event($0) }
        if Task.isCancelled { return "cancelled" }
        logger.info("Serial device lost", metadata: ["serial.path": "\(path)", "error": "end of file"])
        return "\(path): end of file (device closed)"
    }
}
