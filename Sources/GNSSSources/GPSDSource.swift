import FleetcastCore
import GNSS
import JSONEscaping
import Logging
import NIOCore
import NIOPosix

/// Fixes and headings from a gpsd daemon (`gpsd://HOST[:PORT][?device=PATH]`).
///
/// Connects over TCP (swift-nio `ClientBootstrap` + `NIOAsyncChannel`, `\n` framing with a
/// bounded line length), sends `?WATCH={"enable":true,"json":true}` (with `"device"` when
/// one is named) and decodes the reports with ``GPSDMessageDecoder``. When the connection
/// fails, gpsd goes away (restart, upgrade) or stays silent for ``idleTimeout`` it reports `.reconnecting(reason:delay:)`
/// naming the address and error, and connects again with ``Backoff``.
///
/// A gpsd without the receiver (its device list has none open, or it answers a watch naming
/// a device with "No such device") is silent after its answer to the watch: the reason then
/// says so, and where a user looks. Losing a session that delivered something is logged at
/// info; a retry of one that delivered nothing only at debug (the publisher warns about a
/// failing source, at most every few minutes).
public struct GPSDSource: GNSSSource {
    public typealias Element = GNSSEvent
    public typealias Failure = Never

    /// gpsd's host name or address.
    public let host: String
    /// gpsd's TCP port (2947 by default).
    public let port: Int
    /// The one device to watch, or `nil` for all of gpsd's devices.
    public let device: String?
    /// The URI for logs.
    public let uri: String
    /// Longest gpsd line accepted, bytes; longer lines are counted and dropped.
    public let maximumLineLength: Int
    /// How long gpsd may stay silent after the watch before the session is restarted.
    public let idleTimeout: Duration
    private let logger: Logger
    private let backoff: Backoff

    /// A gpsd source; nothing connects until iteration starts.
    public init(
        host: String, port: Int = 2947, device: String? = nil, uri: String? = nil, logger: Logger,
        backoff: Backoff = .default, maximumLineLength: Int = 32 * 1024, idleTimeout: Duration = .seconds(10)
    ) {
        self.host = host
        self.port = port
        self.device = device
        self.uri = uri ?? GNSSSourceDescriptor.gpsd(host: host, port: port, device: device).uri
        self.logger = logger.forSource(self.uri)
        self.backoff = backoff
        self.maximumLineLength = maximumLineLength
        self.idleTimeout = idleTimeout
    }

    /// The `?WATCH` command sent after connecting, with its newline.
    var watchCommand: String {
        var command = #"?WATCH={"enable":true,"json":true"#
        if let device {
            command += #","device":"# + JSONString.quoted(device)
        }
        return command + "}\n"
    }

    /// Starts a fresh run: connect, watch, decode, reconnect after loss, until cancelled.
    public func makeEventStream() -> AsyncStream<GNSSEvent> {
        let source = self
        return EventStream.reconnecting(backoff: backoff) { sink, backoff in
            await source.session(sink: sink, backoff: &backoff)
        }
    }

    /// One connection: returns why it ended.
    private func session(sink: EventSink, backoff: inout Backoff) async -> String {
        let address = "\(host):\(port)"
        let maximumLineLength = maximumLineLength
        let idleTimeout = idleTimeout
        let channel: NIOAsyncChannel<FramedLine, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(10))
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        // A watched gpsd with a device reports every receiver cycle (TPV, SKY, even
                        // without a fix). Silence means a gpsd that accepted the connection but
                        // streams nothing (seen right after a restart): end the session, so the
                        // source reconnects and watches again instead of waiting forever.
                        try channel.pipeline.syncOperations.addHandler(
                            IdleStateHandler(readTimeout: TimeAmount(idleTimeout)))
                        try channel.pipeline.syncOperations.addHandler(CloseWhenSilent(timeout: idleTimeout))
                        try channel.pipeline.syncOperations.addHandler(
                            ByteToMessageHandler(LineFrameDecoder(maximumLength: maximumLineLength)))
                        return try NIOAsyncChannel<FramedLine, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            if Task.isCancelled { return "cancelled" }
            let text = Self.describe(error)
            logger.debug("Cannot connect to gpsd", metadata: ["gpsd.address": "\(address)", "error": "\(text)"])
            return "gpsd \(address): \(text)"
        }
        logger.debug("Connected to gpsd", metadata: ["gpsd.address": "\(address)"])
        var decoder = GPSDMessageDecoder()
        var receivedData = false
        // Whether this session delivered anything (a fix, a heading, a state): losing a
        // session that worked is logged at info, once per loss; a gpsd that keeps accepting
        // and then saying nothing (no receiver) is the publisher's warning, not a line per retry.
        var delivered = false
        let logger = logger
        do {
            try await channel.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(string: watchCommand))
                for try await framed in inbound {
                    switch framed {
                    case .overlong:
                        decoder.noteOverlongLine()
                        logger.debug("Dropped an overlong gpsd line", metadata: ["gpsd.address": "\(address)"])
                    case .line(let line):
                        let before = decoder.statistics.malformed
                        decoder.decode(line: line.readableBytesView) {
                            delivered = true
                            sink.event($0)
                        }
                        if decoder.statistics.malformed != before {
                            logger.debug(
                                "Skipped a malformed gpsd object",
                                metadata: [
                                    "gpsd.address": "\(address)", "gpsd.malformed": "\(decoder.statistics.malformed)",
                                ])
                        } else if !receivedData {
                            receivedData = true
                            backoff.reset()
                            logger.debug(
                                "gpsd is answering",
                                metadata: [
                                    "gpsd.address": "\(address)", "gpsd.release": "\(decoder.gpsdRelease ?? "unknown")",
                                ])
                        }
                    }
                }
            }
        } catch {
            if Task.isCancelled { return "cancelled" }
            var text = Self.describe(error)
            if error is GPSDSilence, let missing = Self.missingReceiver(decoder, device: device) {
                text += "; " + missing
            }
            logger.log(
                level: delivered ? .info : .debug, "Lost gpsd connection",
                metadata: ["gpsd.address": "\(address)", "error": "\(text)"])
            return "gpsd \(address): \(text)"
        }
        if Task.isCancelled { return "cancelled" }
        logger.log(
            level: delivered ? .info : .debug, "Lost gpsd connection",
            metadata: ["gpsd.address": "\(address)", "error": "closed by gpsd"])
        return "gpsd \(address): connection closed by gpsd"
    }

    /// Why a gpsd that went silent after the watch has nothing to report, when it said so:
    /// its answer to the watch (an ERROR: "No such device as /dev/ttyUSB0"), or a device
    /// list without the receiver open; with where a user looks. `nil` when it did not say.
    static func missingReceiver(_ decoder: GPSDMessageDecoder, device: String?) -> String? {
        let what: String
        if let said = decoder.lastError {
            what = "gpsd answered the watch with \"\(said)\""
        } else if decoder.listsNoOpenDevice(device) {
            what = device.map { "gpsd has no \(JSONString.escaped($0)) open" } ?? "gpsd has no receiver open (its device list has none)"
        } else {
            return nil
        }
        return what + ": is the receiver plugged in, and given to gpsd (DEVICES in /etc/default/gpsd, or gpsd's USB hotplug)?"
    }

    /// Error text with errno description where the error carries one.
    static func describe(_ error: any Error) -> String {
        if let io = error as? IOError {
            return "\(errnoText(io.errnoCode)) (errno \(io.errnoCode))"
        }
        if let connect = error as? NIOConnectionError, let first = connect.connectionErrors.first {
            return describe(first.error)
        }
        return "\(error)"
    }
}

/// Ends a gpsd session that has been silent for the read timeout of the `IdleStateHandler`
/// before it: raises ``GPSDSilence`` (the session's reason) and closes the connection.
final class CloseWhenSilent: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let timeout: Duration

    init(timeout: Duration) { self.timeout = timeout }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.fireErrorCaught(GPSDSilence(timeout: timeout))
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// gpsd sent nothing for `timeout` after the watch command.
struct GPSDSilence: Error, CustomStringConvertible {
    let timeout: Duration
    var description: String { "nothing received for \(timeout)" }
}
