import FleetCore
import HTTPTypes
import HummingbirdCore
import NIOCore

/// Adds ``MapSecurityHeaders``' headers (`X-Content-Type-Options: nosniff` and the Content
/// Security Policy) to every response of its connection: the page, the API, Leaflet's files from
/// Hummingbird's `FileMiddleware`, the 401, 404, 421 and 429 answers, and Hummingbird's own 400 for
/// a request it cannot parse. One per connection, after the HTTP parser (Hummingbird's
/// `additionalChannelHandlers`), so no response can leave without them.
final class SecurityHeadersHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPConnectionStateHandler.OutboundIn
    typealias OutboundOut = HTTPConnectionStateHandler.OutboundIn

    private let contentSecurityPolicy: String

    /// `contentSecurityPolicy`: ``MapSecurityHeaders/contentSecurityPolicy(tiles:)``'s value.
    init(contentSecurityPolicy: String) {
        self.contentSecurityPolicy = contentSecurityPolicy
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(var response) = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        response.headerFields[.xContentTypeOptions] = MapSecurityHeaders.contentTypeOptions
        response.headerFields[.contentSecurityPolicy] = contentSecurityPolicy
        context.write(wrapOutboundOut(.head(response)), promise: promise)
    }
}
