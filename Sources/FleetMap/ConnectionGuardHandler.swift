import FleetCore
import FleetcastCore
import HummingbirdCore
import NIOCore

/// What the connections of one server share: how many each client (``PeerAddress``) has open,
/// under a lock, and the limits. ``ConnectionGuardHandler`` asks it as each connection opens and
/// tells it as each closes.
final class ConnectionGuard: Sendable {
    /// The most connections one client may have open at once.
    let maximumPerClient: Int
    /// How long a connection has to send a request's complete headers (``HeaderDeadline``).
    let headerTimeout: TimeAmount
    /// Where refused and timed-out connections are said (once at info, then at debug).
    let refusals: RefusalLog
    private let counts: SanitizerVisibleMutex<PeerConnectionCounts>

    init(maximumPerClient: Int, headerTimeout: Duration, refusals: RefusalLog) {
        self.maximumPerClient = max(1, maximumPerClient)
        self.headerTimeout = TimeAmount(headerTimeout)
        self.refusals = refusals
        counts = SanitizerVisibleMutex(PeerConnectionCounts(limit: maximumPerClient))
    }

    /// Whether a new connection from `client` may stay (then counted until ``close(_:)``).
    func open(_ client: String) -> Bool {
        counts.withLock { $0.open(client) }
    }

    /// A connection that ``open(_:)`` let stay has closed.
    func close(_ client: String) {
        counts.withLock { $0.close(client) }
    }
}

/// Guards one connection (added through Hummingbird's `additionalChannelHandlers`, after the
/// HTTP parser, on the connection's event loop): closes it at once when its client already has
/// ``ConnectionGuard/maximumPerClient`` connections open, and when it has not sent a request's
/// complete headers within ``ConnectionGuard/headerTimeout`` (see ``HeaderDeadline``: of opening, or
/// of its last response's end). Everything else passes through untouched.
///
/// The server's own limit (``FleetMapServer/Options/maximumConnections``, Hummingbird's
/// `MaximumAvailableConnections`) stops accepting at its count; this one decides per client, so
/// a few sockets that never finish their headers no longer hold every place for the idle timeout.
final class ConnectionGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPConnectionStateHandler.InboundIn
    typealias InboundOut = HTTPConnectionStateHandler.InboundIn
    typealias OutboundIn = HTTPConnectionStateHandler.OutboundIn
    typealias OutboundOut = HTTPConnectionStateHandler.OutboundIn

    private let shared: ConnectionGuard
    private var activated = false
    /// The client counted for this connection, until it closes.
    private var client: String?
    private var deadline = HeaderDeadline()
    private var timer: Scheduled<Void>?

    init(shared: ConnectionGuard) {
        self.shared = shared
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { activate(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        activate(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { perform(deadline.receivedHeaders(), context) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { perform(deadline.sentResponseEnd(), context) }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    private func activate(_ context: ChannelHandlerContext) {
        guard !activated else { return }
        activated = true
        let address = context.channel.remoteAddress
        let client = PeerAddress.key(address)
        guard shared.open(client) else {
            shared.refusals.say(
                .connectionsPerClient, "Closed a connection from a client that has as many open as it may",
                metadata: [
                    "http.peer": "\(Self.describe(address))", "http.connections_per_client": "\(shared.maximumPerClient)",
                ])
            context.close(promise: nil)
            return
        }
        self.client = client
        perform(deadline.opened(), context)
    }

    private func release() {
        timer?.cancel()
        timer = nil
        if let client {
            shared.close(client)
            self.client = nil
        }
    }

    private func perform(_ action: HeaderDeadline.Action, _ context: ChannelHandlerContext) {
        switch action {
        case .none:
            return
        case .stop:
            timer?.cancel()
            timer = nil
        case .start:
            timer?.cancel()
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: shared.headerTimeout) {
                let (handler, context) = bound.value
                handler.timer = nil
                guard handler.deadline.expired() else { return }
                handler.shared.refusals.say(
                    .headerTimeout, "Closed a connection that sent no complete request headers in time",
                    metadata: [
                        "http.peer": "\(Self.describe(context.channel.remoteAddress))",
                        "http.header_timeout_seconds": "\(handler.shared.headerTimeout.nanoseconds / 1_000_000_000)",
                    ])
                context.close(promise: nil)
            }
        }
    }

    /// `ip:port` as the log names a peer (`-` when unknown).
    static func describe(_ address: SocketAddress?) -> String {
        address.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "-"
    }
}
