import FleetCore
import Logging
import NIOCore

/// Closes a connection whose peer has stopped reading: when the channel has stayed unwritable
/// (more than NIO's high-water mark of response bytes waiting for the peer) for `timeout`.
///
/// Without it a browser that stops reading holds its connection, its response task (blocked in
/// a write with no end) and everything queued for it, for ever; the map's own slow-reader rule
/// (``BrowserQueues``) frees the browser's queue but cannot end a write. A slow browser that
/// still reads is not hurt: each time its reads make the channel writable again, the clock
/// starts over.
///
/// One per connection, on the connection's event loop (added through Hummingbird's
/// `additionalChannelHandlers`); it passes everything through untouched.
package final class StalledWriteHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = NIOAny
    package typealias InboundOut = NIOAny

    private let timeout: TimeAmount
    private let logger: Logger
    private var deadline: Scheduled<Void>?

    package init(timeout: TimeAmount, logger: Logger) {
        self.timeout = timeout
        self.logger = logger
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            deadline?.cancel()
            deadline = nil
        } else if deadline == nil {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let (logger, timeout) = (logger, timeout)
            deadline = context.eventLoop.scheduleTask(in: timeout) {
                let context = loopBound.value
                let peer = context.channel.remoteAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "-"
                logger.info(
                    "Closed a connection whose client stopped reading",
                    metadata: ["http.peer": "\(peer)", "http.stalled_seconds": "\(timeout.nanoseconds / 1_000_000_000)"])
                context.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }
}
